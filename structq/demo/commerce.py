"""The commercial side: customers, the product catalogue, contracts, and who sells to whom.

Sales lines (the big table) live in :mod:`.sales`; this module holds what they draw on.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterator
from datetime import date, timedelta
from itertools import accumulate

from . import story
from .schema import Contract, Customer, Employee, Product
from .timeline import END, activity, iso, month_end, month_starts, quarter_starts, random_day
from .vocab import (
    BRAND_WORDS,
    COMPANY_SUFFIXES,
    CUSTOMER_LEVEL_ACTIVITY,
    CUSTOMER_LEVEL_WEIGHTS,
    CUSTOMER_LEVELS,
    INDUSTRY_WORDS,
    PRODUCTS,
    REGION_CITIES,
    REGION_MARKET_SHARE,
    REGIONS,
    ProductSpec,
)

#: Customers at scale 1.
BASE_CUSTOMERS = 800
#: Ordinary (below ten million) contracts at scale 1.
BASE_CONTRACTS = 2_400
#: Big deals signed per region per quarter outside the spotlight: 华东 closes the most.
_BIG_DEALS_PER_QUARTER = {region: (0, 1, 2, 3) if region == "华东" else (0, 0, 1, 2)
                          for region in REGIONS}

_SALES_DEPARTMENT = "销售部"
#: Share of ordinary contracts terminated before completion.
_TERMINATION_RATE = 0.04
#: Cheapest unit price of a contract's main product: small items are sold without one, and
#: big deals are about platforms, not consumables.
_CONTRACT_UNIT_PRICE = 20_000
_BIG_DEAL_UNIT_PRICE = 100_000
#: Average days from signing to full payment, by customer level.
_COLLECTION_DAYS_MEAN = {"战略": 45, "重点": 65, "普通": 85}


class SalesForce:
    """Who represents the company to a customer on a given day.

    A customer's account owner handles it while they work here; before they joined, another
    representative of the region (or, failing that, of the company) stands in.
    """

    def __init__(self, employees: list[Employee]) -> None:
        self._by_id = {e.employee_id: e for e in employees}
        self._reps = [e for e in employees if e.department == _SALES_DEPARTMENT]
        self._by_region: dict[str, list[Employee]] = defaultdict(list)
        for rep in self._reps:
            self._by_region[rep.region].append(rep)

    def owner_for(self, rng: random.Random, region: str) -> str:
        """An account owner for a new customer of ``region``: a representative still here."""
        current = [e for e in self._by_region[region] if e.leave_date is None]
        return rng.choice(current or [e for e in self._reps if e.leave_date is None]).employee_id

    def rep_for(self, rng: random.Random, customer: Customer, day: str) -> str:
        """The representative credited with a sale to ``customer`` on ``day`` (ISO)."""
        if self._by_id[customer.owner_id].employed_on(day):
            return customer.owner_id
        for pool in (self._by_region[customer.region], self._reps):
            present = [e for e in pool if e.employed_on(day)]
            if present:
                return rng.choice(present).employee_id
        return customer.owner_id


def generate_customers(rng: random.Random, scale: float, sales_force: SalesForce) -> list[Customer]:
    """Customer companies with invented names; every region has at least one."""
    count = max(len(REGIONS), round(BASE_CUSTOMERS * scale))
    industries = list(INDUSTRY_WORDS)
    used: set[str] = set()
    customers = []
    for number in range(1, count + 1):
        if number <= len(REGIONS):
            region = REGIONS[number - 1]
        else:
            region = rng.choices(REGIONS, weights=list(REGION_MARKET_SHARE.values()))[0]
        cities = REGION_CITIES[region]
        city = rng.choices(cities, weights=[4] + [1] * (len(cities) - 1))[0]
        industry = rng.choice(industries)
        while True:
            name = (f"{city}{rng.choice(BRAND_WORDS)}{rng.choice(INDUSTRY_WORDS[industry])}"
                    f"{rng.choices(COMPANY_SUFFIXES, weights=(6, 3, 1))[0]}")
            if name not in used:
                used.add(name)
                break
        customers.append(
            Customer(
                customer_id=f"C{number:05d}",
                customer_name=name,
                industry=industry,
                region=region,
                city=city,
                level=rng.choices(CUSTOMER_LEVELS, weights=CUSTOMER_LEVEL_WEIGHTS)[0],
                owner_id=sales_force.owner_for(rng, region),
            )
        )
    return customers


def product_id(index: int) -> str:
    """The id of the ``index``-th (0-based) product of :data:`.vocab.PRODUCTS`."""
    return f"PD{index + 1:03d}"


def generate_products() -> list[Product]:
    """The catalogue, straight from the vocabulary; retired products are 停售."""
    return [
        Product(product_id(i), spec.name, spec.category, spec.unit, spec.unit_price,
                "停售" if spec.retired else "在售")
        for i, spec in enumerate(PRODUCTS)
    ]


def on_sale(spec: ProductSpec, day: str) -> bool:
    """Whether a product can be sold on ``day`` (ISO)."""
    return (spec.launched is None or spec.launched <= day) and (spec.retired is None or day < spec.retired)


class CustomerPicker:
    """Draws customers of a region, busier levels more often."""

    def __init__(self, customers: list[Customer]) -> None:
        self._by_region: dict[str, list[Customer]] = defaultdict(list)
        for customer in customers:
            self._by_region[customer.region].append(customer)
        self._weights = {
            region: list(accumulate(CUSTOMER_LEVEL_ACTIVITY[c.level] for c in pool))
            for region, pool in self._by_region.items()
        }

    def pick(self, rng: random.Random, region: str) -> Customer:
        return rng.choices(self._by_region[region], cum_weights=self._weights[region])[0]

    def strategic(self, region: str) -> list[Customer]:
        """The region's 战略 customers, or all of its customers when it has none."""
        pool = self._by_region[region]
        return [c for c in pool if c.level == "战略"] or pool


# --- contracts ----------------------------------------------------------------------------


def generate_contracts(
    rng: random.Random, scale: float, customers: CustomerPicker, sales_force: SalesForce
) -> list[Contract]:
    """Ordinary contracts (below ten million) plus each quarter's big deals.

    Ids run ``HT<year><sequence>`` in signing order.
    """
    drafts = list(_ordinary_contracts(rng, scale, customers, sales_force))
    drafts += list(_big_deals(rng, customers, sales_force))
    drafts.sort(key=lambda contract: contract.signed_at)
    numbered: list[Contract] = []
    per_year: dict[str, int] = defaultdict(int)
    for contract in drafts:
        year = contract.signed_at[:4]
        per_year[year] += 1
        numbered.append(contract._replace(contract_id=f"HT{year}{per_year[year]:05d}"))
    return numbered


def _ordinary_contracts(
    rng: random.Random, scale: float, customers: CustomerPicker, sales_force: SalesForce
) -> Iterator[Contract]:
    months = list(month_starts())
    month_weights = [activity(month.replace(day=15)) for month in months]
    regions, shares = list(REGION_MARKET_SHARE), list(REGION_MARKET_SHARE.values())
    for _ in range(round(BASE_CONTRACTS * scale)):
        month = rng.choices(months, weights=month_weights)[0]
        signed = random_day(rng, month, min(END, month_end(month)))
        customer = customers.pick(rng, rng.choices(regions, weights=shares)[0])
        amount = min(story.ORDINARY_CONTRACT_CAP, max(50_000.0, rng.lognormvariate(math.log(600_000), 0.9)))
        days = None if rng.random() < _TERMINATION_RATE else _collection_days(rng, customer)
        yield _contract(rng, customer, signed, round(amount, -2), days, sales_force)


def _big_deals(rng: random.Random, customers: CustomerPicker, sales_force: SalesForce) -> Iterator[Contract]:
    """Deals of ten million and more, a few per region and quarter; the spotlight quarter
    of :mod:`.story` gets its fixed set instead."""
    for quarter_start in quarter_starts():
        quarter_end = min(END, month_end(quarter_start.replace(month=quarter_start.month + 2)))
        for region in REGIONS:
            if (region, (quarter_start, quarter_end)) == (story.BIG_DEAL_REGION, story.BIG_DEAL_QUARTER):
                collection = list(story.BIG_DEAL_COLLECTION_DAYS)
            else:
                count = rng.choice(_BIG_DEALS_PER_QUARTER[region])
                collection = [rng.randint(30, 180) for _ in range(count)]
            for days in collection:
                customer = rng.choice(customers.strategic(region))
                signed = random_day(rng, quarter_start, quarter_end)
                amount = float(rng.randrange(story.BIG_DEAL_AMOUNT // 10_000 + 1, 5_000) * 10_000)
                yield _contract(rng, customer, signed, amount, days, sales_force)


def _contract(
    rng: random.Random,
    customer: Customer,
    signed: date,
    amount: float,
    collection_days: int | None,
    sales_force: SalesForce,
) -> Contract:
    """A contract: 已完成 once fully collected by the end of the window, else 履行中 (its
    collection period still unknown); ``collection_days=None`` means it was 已终止."""
    signed_at = iso(signed)
    smallest = _BIG_DEAL_UNIT_PRICE if amount >= story.BIG_DEAL_AMOUNT else _CONTRACT_UNIT_PRICE
    choices = [(i, spec) for i, spec in enumerate(PRODUCTS)
               if on_sale(spec, signed_at) and spec.unit_price >= smallest]
    index, spec = rng.choice(choices)
    if collection_days is None:
        status, days = "已终止", None
    elif signed + timedelta(days=collection_days) > END:
        status, days = "履行中", None
    else:
        status, days = "已完成", collection_days
    return Contract(
        contract_id="",
        contract_name=f"{customer.customer_name}{spec.name}采购合同",
        customer_id=customer.customer_id,
        product_id=product_id(index),
        employee_id=sales_force.rep_for(rng, customer, signed_at),
        region=customer.region,
        amount=amount,
        signed_at=signed_at,
        collection_days=days,
        status=status,
    )


def _collection_days(rng: random.Random, customer: Customer) -> int:
    """Days from signing to full payment: big customers pay faster."""
    return max(7, round(rng.gauss(_COLLECTION_DAYS_MEAN[customer.level], 30)))
