"""The board's read-only pages and pictures, and the redirect from `/` to the board.

Thin, as every door: take the signed-in viewer (`require_viewer`), call one read of countersign/services/board_reads.py
on the
engine role's connection, render a template. Every page and picture first passes the one read rule
(`countersign.services.reading.authorize`, the `read close` roles); a viewer without it gets a plain 403 page, an
unknown close
or gate a 404 page.

Pages: `/board/` (closes and payment runs), `/board/inbox` (waiting on me), `/board/closes/{close_id}`,
`/board/gates/{gate_id}`. Pictures (`image/svg+xml`, their own CSP since pygal's SVG carries an inline <style>):
`/board/charts/closes/{close_id}/variance.svg`, `.../position.svg`, `.../timeline.svg`. The stylesheet:
`/board/static/board.css`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from countersign.board.charts import SVG_MEDIA_TYPE, position_svg, task_spans, timeline_svg, variance_svg
from countersign.board.deps import PREFIX, BoardDeps
from countersign.board.rendering import board_environment
from countersign.board.session import Viewer, require_viewer
from countersign.cards.certificates import certificate_summary
from countersign.cards.model import CardDataError
from countersign.cards.voids import void_sentence
from countersign.certificates.amendment import may_amend
from countersign.policy.command_roles import READ_CLOSE
from countersign.services import board_evidence as evidence
from countersign.services.board_reads import (
    may_decide,
    read_close_timeline,
    read_close_view,
    read_contract_position,
    read_gate_view,
    read_inbox,
    read_overview,
    read_variance_output,
)
from countersign.services.errors import CloseNotFound, Forbidden, GateNotFound
from countersign.services.reading import authorize

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"board.css": "text/css; charset=utf-8"}
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'"
NOT_FOUND = (CloseNotFound, GateNotFound)
SignedIn = Annotated[Viewer, Depends(require_viewer)]


def build_root_router() -> APIRouter:
    """`GET /` sends a browser to the board."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=303)

    return router


def build_page_router(deps: BoardDeps) -> APIRouter:
    env = board_environment(deps.locale)
    router = APIRouter()
    static = {name: (STATIC / name).read_bytes() for name in STATIC_FILES}

    def page(template: str, viewer: Viewer, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(viewer=viewer, **context)
        return HTMLResponse(html, status_code=status_code)

    async def answer(viewer: Viewer, render: Callable[[], Awaitable[Response]]) -> Response:
        """The rule first, then the read; a refusal or an unknown id as its plain page."""
        try:
            authorize(READ_CLOSE, deps.policy, viewer.caller)
            return await render()
        except Forbidden as refused:
            return page("refused.html", viewer, 403, refused=refused)
        except NOT_FOUND as missing:
            return page("not_found.html", viewer, 404, missing=str(missing))

    def svg(data: bytes) -> Response:
        headers = {"Content-Security-Policy": SVG_CSP, "X-Content-Type-Options": "nosniff"}
        return Response(data, media_type=SVG_MEDIA_TYPE, headers=headers)

    @router.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str) -> Response:
        if name not in STATIC_FILES:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(static[name], media_type=STATIC_FILES[name], headers={"Cache-Control": "max-age=300"})

    @router.get("/", response_class=HTMLResponse)
    async def overview(viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                found = await read_overview(conn, deps.policy, viewer.caller)
            return page("overview.html", viewer, overview=found)

        return await answer(viewer, render)

    @router.get("/inbox", response_class=HTMLResponse)
    async def inbox(viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                gates = await read_inbox(conn, deps.policy, viewer.caller)
            return page("inbox.html", viewer, gates=gates)

        return await answer(viewer, render)

    @router.get("/closes/{close_id}", response_class=HTMLResponse)
    async def close_page(close_id: str, viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                view = await read_close_view(conn, deps.policy, viewer.caller, close_id)
                variance = await read_variance_output(conn, deps.policy, viewer.caller, close_id)
            return page(
                "close.html",
                viewer,
                view=view,
                close=view.close,
                has_variance=bool(variance.result.get("flagged")),
                is_payment_run=view.close.workflow == "certificates",
            )

        return await answer(viewer, render)

    @router.get("/gates/{gate_id}", response_class=HTMLResponse)
    async def gate_page(gate_id: str, viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                view = await read_gate_view(conn, deps.policy, viewer.caller, gate_id)
            gate = view.gate
            summary = gate.summary or {}
            certificate, certificate_error = None, None
            try:
                certificate = certificate_summary(summary)
            except CardDataError as exc:
                certificate_error = str(exc)
            return page(
                "gate.html",
                viewer,
                gate=gate,
                view=view,
                can_decide=may_decide(gate, viewer.caller),
                can_amend=may_decide(gate, viewer.caller) and may_amend(viewer.caller.roles, gate.kind, gate.summary),
                currency=view.currency,
                escalation=evidence.escalation_of(summary),
                bank_accounts=evidence.bank_accounts(summary),
                journal=evidence.proposed_journal(summary),
                variance=evidence.variance_table(summary),
                intercompany=evidence.intercompany_pairs(summary),
                signoff=evidence.signoff(summary),
                certificate=certificate,
                certificate_error=certificate_error,
                today=datetime.now(UTC).date(),
                voided=[void_sentence(void, locale=deps.locale) for void in gate.voids],
            )

        return await answer(viewer, render)

    @router.get("/charts/closes/{close_id}/variance.svg")
    async def variance_chart(close_id: str, viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                output = await read_variance_output(conn, deps.policy, viewer.caller, close_id)
            table = evidence.variance_table(output.result)
            if table is None or not table.rows:
                return page("not_found.html", viewer, 404, missing=f"close {close_id} has no variance analysis yet")
            return svg(variance_svg(table.rows, output.currency, locale=deps.locale))

        return await answer(viewer, render)

    @router.get("/charts/closes/{close_id}/position.svg")
    async def position_chart(close_id: str, viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                position = await read_contract_position(conn, deps.policy, viewer.caller, close_id)
            if position is None or not position.points:
                return page("not_found.html", viewer, 404, missing=f"close {close_id} is not a payment run")
            title = f"{position.contract_id} {position.contract_title}"
            return svg(position_svg(position.points, position.currency, title, locale=deps.locale))

        return await answer(viewer, render)

    @router.get("/charts/closes/{close_id}/timeline.svg")
    async def timeline_chart(close_id: str, viewer: SignedIn) -> Response:
        async def render() -> Response:
            async with deps.connect_engine() as conn:
                timeline = await read_close_timeline(conn, deps.policy, viewer.caller, close_id)
            return svg(timeline_svg(task_spans(timeline), title="Tasks over the close's timeline"))

        return await answer(viewer, render)

    return router
