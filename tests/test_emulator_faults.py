"""The emulator's faults beyond status codes, over real HTTP: truncated JSON, a slow drip,
read timeouts before and inside the body, a reset in the middle of the body, connection
refused, and list endpoints that misbehave on paging (repeated, cyclic, empty cursors).

Timeouts here are the client's (a fraction of a second); faults hold answers for wall
seconds, so each test keeps them short. Nothing asserts on measured time.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import test_emulator
from _helpers import at_step
from test_emulator import _client, completed_run, create

from skill.emulator import EmulatorServer, closed_port

# the fixtures of tests/test_emulator.py: a frozen clock, clients of the default user and of the admin routes
emu, api, admin = test_emulator.emu, test_emulator.api, test_emulator.admin


def short_timeout(emu: EmulatorServer, read: float) -> httpx.Client:
    client = _client(emu)
    client.timeout = httpx.Timeout(5.0, read=read)
    return client


# -- answers that break -------------------------------------------------------------------------

def test_truncated_json_is_a_complete_200_answer_whose_body_is_not_json(api: httpx.Client, emu: EmulatorServer) -> None:
    whole = api.get("/user/whoami").content
    rule = emu.faults.truncate("GET", "/user/whoami")
    cut = api.get("/user/whoami")
    assert cut.status_code == 200 and int(cut.headers["content-length"]) == len(cut.content) == len(whole) // 2
    assert whole.startswith(cut.content)
    with pytest.raises(json.JSONDecodeError):
        cut.json()
    assert rule.hits == 1 and api.get("/user/whoami").json()["data"]["id"]  # the same client goes on

    emu.faults.truncate("GET", "/user/whoami", after_bytes=10_000)  # longer than the body: still one byte short
    assert api.get("/user/whoami").content == whole[:-1]


def test_truncated_json_on_the_traces_host(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    completed_run(api, emu, rl_config)
    emu.faults.truncate("GET", "/traces", after_bytes=40)
    page = api.get("/traces", params={"limit": 5})
    assert page.status_code == 200 and len(page.content) == 40 and page.content.startswith(b'{"items":[')


def test_a_slow_drip_arrives_whole_when_each_gap_is_below_the_read_timeout(emu: EmulatorServer) -> None:
    with _client(emu) as plain:
        whole = plain.get("/user/whoami").content
    emu.faults.drip("GET", "/user/whoami", chunk_bytes=100, interval=0.1)
    with short_timeout(emu, read=1.0) as client, client.stream("GET", "/user/whoami") as response:
        pieces = list(response.iter_raw())
    assert b"".join(pieces) == whole and len(pieces) >= len(whole) // 100  # it came in pieces
    emu.faults.drip("GET", "/user/whoami", chunk_bytes=100, interval=0.6)
    with short_timeout(emu, read=0.2) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/user/whoami")


def test_delay_withholds_the_headers_past_the_read_timeout(emu: EmulatorServer) -> None:
    rule = emu.faults.delay(1.0, "GET", "/user/whoami")
    with short_timeout(emu, read=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.get("/user/whoami")
        assert rule.hits == 1 and client.get("/user/whoami").status_code == 200


def test_stall_sends_the_headers_and_first_bytes_then_withholds_the_rest(emu: EmulatorServer) -> None:
    emu.faults.stall(1.0, "GET", "/user/whoami", after_bytes=20)
    received = b""
    with short_timeout(emu, read=0.2) as client:
        with pytest.raises(httpx.ReadTimeout), client.stream("GET", "/user/whoami") as response:
            assert response.status_code == 200
            for chunk in response.iter_raw():
                received += chunk
    assert received == b'{"data":{"id":"cuser'[:20]


@pytest.mark.parametrize(("mode", "error"), [("close", httpx.RemoteProtocolError), ("reset", httpx.ReadError)])
def test_a_cut_in_the_middle_of_the_body_closes_or_resets_the_connection(
        emu: EmulatorServer, mode: str, error: type[Exception]) -> None:
    emu.faults.cut(10, "GET", "/user/whoami", mode=mode)
    with _client(emu) as client, pytest.raises(error):
        client.get("/user/whoami")


def test_a_cut_streamed_raw_trace_arrives_incomplete(api: httpx.Client, emu: EmulatorServer) -> None:
    emu.state.set_scenario("many_traces", count=40, trace_bytes=300_000)
    run_id = create(api, {"model": {"name": "PrimeIntellect/Qwen3-0.6B"}, "inference": {}, "max_steps": 4})
    emu.state.advance(at_step(4) + 5)
    trace = api.get("/traces", params={"run_id": run_id, "limit": 1}).json()["items"][0]
    emu.faults.cut(trace["size_bytes"] + 5, "GET", "/traces/tr-*")  # beyond the end: the last byte is held back
    with pytest.raises(httpx.RemoteProtocolError):
        api.get(f"/traces/{trace['trace_id']}", params={"raw": "true"})


def test_closed_port_refuses_connections_until_released() -> None:
    with closed_port() as port:
        with pytest.raises(httpx.ConnectError):
            httpx.get(port.url + "/api/v1/user/whoami", timeout=2)
        assert port.url == f"http://127.0.0.1:{port.port}"


def test_new_fault_kinds_are_added_from_another_process_through_the_admin_route(
        admin: httpx.Client, api: httpx.Client) -> None:
    added = admin.post("/faults", json={"faults": [
        {"kind": "truncate", "method": "GET", "path": "/user/whoami", "after_bytes": 7},
        {"kind": "cursor", "mode": "empty", "path": "/traces", "times": None},
        {"kind": "stall", "path": "/user/teams", "after_bytes": 3, "delay": 0.1},
        {"kind": "cut", "mode": "reset", "path": "/rft/runs"},
    ]}).json()["faults"]
    assert [(f["kind"], f["mode"]) for f in added] == [("truncate", None), ("cursor", "empty"), ("stall", None),
                                                       ("cut", "reset")]
    assert len(api.get("/user/whoami").content) == 7
    assert admin.post("/faults", json={"kind": "cursor", "mode": "sideways"}).status_code == 400
    assert admin.post("/faults", json={"kind": "drip", "mode": "reset"}).status_code == 400
    assert admin.post("/faults", json={"kind": "drip", "chunk_bytes": 0}).status_code == 400


# -- paging that misbehaves ---------------------------------------------------------------------

def walk(api: httpx.Client, path: str, params: dict[str, Any], *,
         bound: int = 12) -> tuple[list[str | None], list[str]]:
    """Follow ``next_cursor`` like a naive client, at most ``bound`` requests: the cursors
    answered, and the ids seen."""
    answered: list[str | None] = []
    seen: list[str] = []
    cursor = None
    for _ in range(bound):
        page = api.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        seen += [item.get("trace_id") or item.get("episode_id") or item["run_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        answered.append(cursor)
        if not cursor:
            break
    return answered, seen


@pytest.mark.parametrize(("path", "params"), [
    ("/traces", {"limit": 10}),
    ("/episodes", {"limit": 5}),
])
def test_a_repeated_cursor_makes_a_naive_walk_go_round_forever(api: httpx.Client, emu: EmulatorServer,
                                                              rl_config: dict, path: str, params: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    honest, all_ids = walk(api, path, {**params, "run_id": run_id}, bound=100)
    assert honest[-1] is None and len(set(all_ids)) == len(all_ids)
    emu.faults.cursor("repeat", path=path)
    answered, seen = walk(api, path, {**params, "run_id": run_id})
    assert len(answered) == 12 and len(set(answered)) == 1 and answered[0] == honest[0]
    assert seen[:2 * params["limit"]] == all_ids[:2 * params["limit"]]  # pages 1 and 2, then page 2 again and again
    assert seen[2 * params["limit"]:3 * params["limit"]] == all_ids[params["limit"]:2 * params["limit"]]


def test_a_cyclic_cursor_goes_a_b_a_on_the_trace_runs_list(api: httpx.Client, emu: EmulatorServer,
                                                          rl_config: dict) -> None:
    for _ in range(3):  # three trace runs of their own, plus their three eval runs
        completed_run(api, emu, rl_config)
    honest, all_ids = walk(api, "/runs", {"limit": 2})
    assert honest == [honest[0], honest[1], None] and len(all_ids) == 6
    emu.faults.cursor("cycle", path="/runs")
    answered, seen = walk(api, "/runs", {"limit": 2}, bound=6)
    a, b = honest[0], honest[1]
    assert answered == [a, b, a, b, a, b]
    assert seen[:6] == all_ids and seen[6:8] == all_ids[2:4]  # pages 1, 2, 3, then 2 (after A), 3 (after B), ...


def test_an_empty_cursor_while_more_remain_ends_a_naive_walk_early(api: httpx.Client, emu: EmulatorServer,
                                                                  rl_config: dict) -> None:
    run_id = completed_run(api, emu, rl_config)
    emu.faults.cursor("empty", path="/traces", skip=1)  # the first page is honest
    answered, seen = walk(api, "/traces", {"run_id": run_id, "limit": 100})
    assert answered[0] and answered[1] == "" and len(seen) == 200 < 320
    first = api.get("/traces", params={"run_id": run_id, "limit": 100, "cursor": ""}).json()
    assert [t["trace_id"] for t in first["items"]] == seen[:100]  # an empty cursor is a first page


@pytest.mark.parametrize(("mode", "served_pages"), [("repeat", [1, 1, 1]), ("cycle", [1, 2, 1]), ("empty", [])])
def test_the_platform_runs_list_misbehaves_on_page_numbers(api: httpx.Client, emu: EmulatorServer, rl_config: dict,
                                                           mode: str, served_pages: list[int]) -> None:
    for _ in range(5):
        create(api, rl_config)
        emu.state.advance(1)
    honest = [[r["id"] for r in api.get("/rft/runs", params={"page": p, "limit": 2}).json()["runs"]] for p in (1, 2, 3)]
    emu.faults.cursor(mode, path="/rft/runs")
    pages = [api.get("/rft/runs", params={"page": p, "limit": 2}).json() for p in (1, 2, 3)]
    assert [p["page"] for p in pages] == [1, 2, 3] and all(p["total"] == 5 and p["total_pages"] == 3 for p in pages)
    expected = [honest[n - 1] for n in served_pages] if served_pages else [[], [], []]
    assert [[r["id"] for r in p["runs"]] for p in pages] == expected


def test_cursor_faults_leave_error_answers_alone(api: httpx.Client, emu: EmulatorServer) -> None:
    emu.faults.cursor("repeat", path="/traces")
    refused = api.get("/traces", params={"limit": 101})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_filter"

