"""Two real API servers for the API-source tests, run under uvicorn on a free loopback port:

- a Strawberry GraphQL app (projects, people, tickets of two tenants; ``Person.email`` and
  ``Person.salary`` are personal data; ``contacts``, needing no argument, whose innocuously
  named ``Contact.contact`` holds email addresses; a ``deleteProject`` mutation);
- a FastAPI app (``listTickets``, ``getTicket``, ``listProjects``; ``reporter.email`` is
  personal data; ``listContacts``, needing no parameter, whose ``reach`` holds phone numbers;
  ``createTicket`` POST and ``deleteTicket`` DELETE).

Each counts what reached it (``hits``: every request by method; ``writes``: mutations, POST,
DELETE), so a test can show that a refused request never arrived.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import strawberry
import uvicorn
from fastapi import FastAPI, Request
from fastapi import Query as QueryParam
from pydantic import BaseModel
from strawberry.asgi import GraphQL

from tests.servers import LOOPBACK, free_port

__all__ = ["CONTACTS", "GRAPHQL_WRITES", "PEOPLE", "PROJECTS", "TICKETS", "Served", "graphql_app", "rest_app", "serve"]

PEOPLE = [
    {"id": 1, "tenant": 1, "name": "王芳", "email": "wang.fang@example.com", "salary": 30000},
    {"id": 2, "tenant": 1, "name": "李雷", "email": "li.lei@example.com", "salary": 28000},
    {"id": 3, "tenant": 2, "name": "Ann Other", "email": "ann@other.example", "salary": 90000},
]
PROJECTS = [
    {"id": 1, "tenant": 1, "name": "apollo", "status": "active", "owner": 1},
    {"id": 2, "tenant": 1, "name": "zephyr", "status": "done", "owner": 2},
    {"id": 3, "tenant": 2, "name": "secret-t2", "status": "active", "owner": 3},
]
TICKETS = [
    {"id": 10, "tenant": 1, "project": "apollo", "title": "login fails", "status": "open", "priority": 2, "reporter": 1},
    {"id": 11, "tenant": 1, "project": "apollo", "title": "slow search", "status": "closed", "priority": 3, "reporter": 2},
    {"id": 12, "tenant": 1, "project": "zephyr", "title": "export broken", "status": "open", "priority": 1, "reporter": 1},
    {"id": 13, "tenant": 2, "project": "secret-t2", "title": "tenant two only", "status": "open", "priority": 1, "reporter": 3},
]


#: Rows with no tenant and no personal-data name, whose values are personal data all the same.
CONTACTS = [
    {"name": "front desk", "contact": "desk@example.com", "reach": "+1 415-555-0100"},
    {"name": "support", "contact": "help@example.com", "reach": "+1 415-555-0101"},
    {"name": "sales", "contact": "sales@example.org", "reach": "+44 20-7946-0958"},
]


class Served:
    """A running app: its base URL and what reached it."""

    def __init__(self, url: str, hits: Counter[str], writes: Counter[str]) -> None:
        self.url, self.hits, self.writes = url, hits, writes


# --- GraphQL ------------------------------------------------------------------------------------

#: Mutations that reached the GraphQL app (one app runs at a time; ``serve`` clears it).
GRAPHQL_WRITES: Counter[str] = Counter()


@strawberry.type(description="Someone who works on projects")
class Person:
    id: int
    name: str
    email: str
    salary: int


def _person(pid: int) -> Person:
    p = next(x for x in PEOPLE if x["id"] == pid)
    return Person(id=p["id"], name=p["name"], email=p["email"], salary=p["salary"])


@strawberry.type(description="A project of one tenant")
class Project:
    id: int
    name: str = strawberry.field(description="the project's short name")
    status: str
    owner_id: strawberry.Private[int]

    @strawberry.field
    def owner(self) -> Person:
        return _person(self.owner_id)

    @strawberry.field
    def projects_of_owner(self, first: int | None = None) -> list[Project]:  # recursion, for depth bombs; a nested page
        return [_project(p) for p in PROJECTS if p["owner"] == self.owner_id][:first]


def _project(p: dict[str, Any]) -> Project:
    return Project(id=p["id"], name=p["name"], status=p["status"], owner_id=p["owner"])


@strawberry.type(description="A desk to reach")
class Contact:
    name: str
    contact: str


@strawberry.type
class Query:
    @strawberry.field(description="The tenant's projects")
    def projects(self, tenant_id: int, status: str | None = None, first: int | None = None) -> list[Project]:
        found = [_project(p) for p in PROJECTS if p["tenant"] == tenant_id and (status is None or p["status"] == status)]
        return found[:first] if first is not None else found

    @strawberry.field(description="The tenant's people")
    def people(self, tenant_id: int) -> list[Person]:
        return [_person(p["id"]) for p in PEOPLE if p["tenant"] == tenant_id]

    @strawberry.field(description="Desks to reach")
    def contacts(self, first: int | None = None) -> list[Contact]:
        return [Contact(name=c["name"], contact=c["contact"]) for c in CONTACTS][:first]


@strawberry.type
class Mutation:
    @strawberry.mutation
    def delete_project(self, id: int) -> bool:
        GRAPHQL_WRITES["mutation"] += 1
        return True


def graphql_app() -> Any:
    return GraphQL(strawberry.Schema(query=Query, mutation=Mutation))


# --- REST ---------------------------------------------------------------------------------------

class Reporter(BaseModel):
    name: str
    email: str


class Ticket(BaseModel):
    id: int
    title: str
    status: str
    priority: int
    project: str
    reporter: Reporter


class ProjectRow(BaseModel):
    name: str
    status: str
    open_tickets: int


class ProjectPage(BaseModel):
    items: list[ProjectRow]
    total: int


class State(BaseModel):
    state: str
    calls: int = 0


class Echo(BaseModel):
    value: str
    most_at_once: int


class Item(BaseModel):
    n: int
    text: str


class ContactRow(BaseModel):
    name: str
    reach: str


class Status(str, Enum):
    open = "open"
    closed = "closed"


def _ticket(t: dict[str, Any]) -> dict[str, Any]:
    reporter = next(p for p in PEOPLE if p["id"] == t["reporter"])
    return {"id": t["id"], "title": t["title"], "status": t["status"], "priority": t["priority"], "project": t["project"],
            "reporter": {"name": reporter["name"], "email": reporter["email"]}}


def rest_app(hits: Counter[str], writes: Counter[str]) -> FastAPI:
    app = FastAPI(title="tickets")

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Any:
        hits[request.method] += 1
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            writes[request.method] += 1
        return await call_next(request)

    @app.get("/api/tickets", operation_id="listTickets", summary="Tickets of a tenant")
    def list_tickets(tenant: int, project: str | None = None, status: Status | None = None,
                     limit: int = QueryParam(default=50, ge=1, le=500)) -> list[Ticket]:
        found = [t for t in TICKETS if t["tenant"] == tenant and (project is None or t["project"] == project)
                 and (status is None or t["status"] == status.value)]
        return [Ticket(**_ticket(t)) for t in found[:limit]]

    @app.get("/api/tickets/{ticket_id}", operation_id="getTicket", summary="One ticket")
    def get_ticket(ticket_id: int, tenant: int) -> list[Ticket]:
        return [Ticket(**_ticket(t)) for t in TICKETS if t["id"] == ticket_id and t["tenant"] == tenant]

    @app.get("/api/tickets-by-id", operation_id="ticketsById", summary="Tickets by their ids, in one request")
    def tickets_by_id(tenant: int, ids: list[int] = QueryParam()) -> list[Ticket]:
        return [Ticket(**_ticket(t)) for t in TICKETS if t["id"] in ids and t["tenant"] == tenant]

    @app.get("/api/projects", operation_id="listProjects", summary="Projects with their ticket counts")
    def list_projects(tenant: int) -> ProjectPage:
        items = [{"name": p["name"], "status": p["status"],
                  "open_tickets": sum(t["project"] == p["name"] and t["status"] == "open" for t in TICKETS)}
                 for p in PROJECTS if p["tenant"] == tenant]
        return ProjectPage(items=[ProjectRow(**i) for i in items], total=len(items))

    @app.get("/api/contacts", operation_id="listContacts", summary="Desks to reach")
    def list_contacts() -> list[ContactRow]:
        return [ContactRow(name=c["name"], reach=c["reach"]) for c in CONTACTS]

    @app.post("/api/tickets", operation_id="createTicket", summary="Open a ticket")
    def create_ticket(ticket: dict[str, Any]) -> dict[str, Any]:
        return {"created": True}

    @app.delete("/api/tickets/{ticket_id}", operation_id="deleteTicket", summary="Delete a ticket")
    def delete_ticket(ticket_id: int) -> dict[str, Any]:
        return {"deleted": ticket_id}

    flaky = Counter[str]()

    @app.get("/api/flaky", operation_id="flakyStatus", summary="Busy (429) on every other request")
    def flaky_status() -> list[State]:
        from fastapi.responses import JSONResponse

        flaky["calls"] += 1
        if flaky["calls"] % 2:
            return JSONResponse({"detail": "busy"}, status_code=429, headers={"Retry-After": "0"})
        return [State(state="ok", calls=flaky["calls"])]

    @app.get("/api/slow", operation_id="slowStatus", summary="Answers after two seconds")
    async def slow_status() -> list[State]:
        import asyncio

        await asyncio.sleep(2)
        return [State(state="late")]

    inflight = {"now": 0, "most": 0}

    @app.get("/api/echo", operation_id="echoValue", summary="Its value back, a little later")
    async def echo_value(value: str) -> list[Echo]:
        import asyncio

        inflight["now"] += 1
        inflight["most"] = max(inflight["most"], inflight["now"])
        await asyncio.sleep(0.1)
        inflight["now"] -= 1
        return [Echo(value=value, most_at_once=inflight["most"])]

    @app.get("/api/big", operation_id="bigList", summary="A large answer")
    def big_list() -> list[Item]:
        return [Item(n=i, text="x" * 100) for i in range(2000)]

    @app.get("/api/elsewhere", operation_id="goElsewhere", summary="Redirects to another host")
    def elsewhere() -> Any:
        from fastapi.responses import RedirectResponse

        return RedirectResponse("http://198.51.100.7/steal")

    return app


class _Counted:
    """ASGI wrapper counting every request by method (the GraphQL app's own counter sees only
    resolved mutations; this sees every POST)."""

    def __init__(self, app: Any, hits: Counter[str]) -> None:
        self.app, self.hits = app, hits

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.hits[scope["method"]] += 1
        await self.app(scope, receive, send)


@contextmanager
def serve(kind: str) -> Iterator[Served]:
    """Run the ``graphql`` or ``rest`` app under uvicorn on a free loopback port until the
    block ends."""
    hits: Counter[str] = Counter()
    writes: Counter[str] = Counter()
    if kind == "graphql":
        GRAPHQL_WRITES.clear()
        writes = GRAPHQL_WRITES
    app = _Counted(graphql_app(), hits) if kind == "graphql" else rest_app(hits, writes)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the {kind} test server did not start")
        time.sleep(0.02)
    try:
        yield Served(f"http://{LOOPBACK}:{port}" + ("/graphql" if kind == "graphql" else ""), hits, writes)
    finally:
        server.should_exit = True
        thread.join(10)
