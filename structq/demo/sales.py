"""Sales lines: the big table, with growth, seasons, a product launch and retirements.

Volume is planned per day first (so the writer knows the total and can report progress),
then lines are drawn day by day: region by market share, product by popularity among what
is on sale that month, customer by level, representative by account ownership.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from datetime import date
from functools import cache
from itertools import accumulate

from . import story
from .commerce import CustomerPicker, SalesForce, on_sale, product_id
from .schema import Sale
from .timeline import activity, days, iso
from .vocab import PRODUCTS, REGION_MARKET_SHARE

#: Sales lines on an average day at the start of the window, at scale 1.
BASE_DAILY_LINES = 150

#: List-price discounts granted on a line, equally likely.
_DISCOUNTS = (1.0, 1.0, 0.95, 0.9, 0.85, 0.8)

_REGIONS = tuple(REGION_MARKET_SHARE)
_REGION_CUMULATIVE = tuple(accumulate(REGION_MARKET_SHARE.values()))


def plan_volume(rng: random.Random, scale: float) -> list[tuple[date, int]]:
    """How many sales lines each day of the window gets (roughly Poisson around the trend)."""
    plan = []
    for day in days():
        mean = BASE_DAILY_LINES * scale * activity(day)
        plan.append((day, max(0, round(rng.gauss(mean, math.sqrt(mean))))))
    return plan


def generate_sales(
    rng: random.Random,
    volume: list[tuple[date, int]],
    customers: CustomerPicker,
    sales_force: SalesForce,
) -> Iterator[Sale]:
    """The lines of ``volume``'s days, numbered from 1 in date order."""
    sale_id = 0
    for day, count in volume:
        day_iso = iso(day)
        indices, cumulative = _catalogue(day.year, day.month)
        regions = rng.choices(_REGIONS, cum_weights=_REGION_CUMULATIVE, k=count)
        products = rng.choices(indices, cum_weights=cumulative, k=count)
        for region, index in zip(regions, products, strict=True):
            spec = PRODUCTS[index]
            customer = customers.pick(rng, region)
            quantity = rng.randint(*spec.quantity)
            unit_price = round(spec.unit_price * rng.choice(_DISCOUNTS), 2)
            sale_id += 1
            yield Sale(
                sale_id=sale_id,
                sale_date=day_iso,
                region=region,
                city=customer.city,
                product_id=product_id(index),
                customer_id=customer.customer_id,
                employee_id=sales_force.rep_for(rng, customer, day_iso),
                quantity=quantity,
                unit_price=unit_price,
                amount=round(unit_price * quantity, 2),
            )


@cache
def _catalogue(year: int, month: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Products on sale in a month (launches and retirements fall on a month's first day)
    and their cumulative popularity, 产品X following its launch ramp."""
    first = date(year, month, 1).isoformat()
    indices, weights = [], []
    for index, spec in enumerate(PRODUCTS):
        if not on_sale(spec, first):
            continue
        weight = spec.popularity
        if spec.name == story.PRODUCT_X and spec.launched:
            launch = date.fromisoformat(spec.launched)
            weight *= story.product_x_ramp((year - launch.year) * 12 + month - launch.month)
        indices.append(index)
        weights.append(weight)
    return tuple(indices), tuple(accumulate(weights))
