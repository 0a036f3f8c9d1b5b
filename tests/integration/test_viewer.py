"""`memlineage serve`, the lineage viewer (issue 28): HTTP-level tests with Starlette's TestClient, then a real
browser (Debian's chromium, headless, driven by selenium) against `memlineage serve` started as a process.
Its screenshots go to a pytest temporary directory, or to ``$MEMLINEAGE_VIEWER_SCREENSHOTS`` when set.

The browser test installs ``chromium`` and ``chromium-driver`` with apt-get when they are missing and it runs as
root; it skips, saying why, only when that is impossible. Its screenshots are printed at the end of the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from memlineage import MemoryManager, Scope, Status
from memlineage.index import InMemoryIndex, OnnxMiniLMEmbedder, default_model_dir
from memlineage.settings import MemLineageSettings
from memlineage.testing import FakeEmbedder
from memlineage.viewer import ViewerStore, create_app
from starlette.testclient import TestClient

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (default_model_dir() / "model.onnx").is_file(), reason="embedding model files not available offline"
    ),
]

REPO = Path(__file__).resolve().parents[2]
ALICE = Scope(user_id="alice")
BOB = Scope(user_id="bob")
XSS = "Book Hotel Alfama <script>alert('pwned')</script>"
BOB_TEXTS = ("Bob keeps his passport in the blue drawer", "My favourite restaurant is Nobu")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An embedded store: alice's trip chain, an update decision, a retraction; bob's own memories and decision."""
    store = tmp_path_factory.mktemp("viewer") / "store"
    with MemoryManager.open(store, embedder=OnnxMiniLMEmbedder()) as mm:
        city = mm.remember("I am travelling to Lisbon in May", scope=ALICE, source="user")
        hotel = mm.remember("Hotel Alfama 95 EUR", scope=ALICE, source="tool:search_hotels", derived_from=[city.id])
        plan = mm.remember(XSS, scope=ALICE, source="agent", derived_from=[hotel.id, city.id])
        old = mm.remember("My favourite restaurant is Din Tai Fung", scope=ALICE)
        new = mm.remember("My favourite restaurant is Haidilao", scope=ALICE)
        nuts = mm.remember("I am allergic to peanuts", scope=ALICE)
        mm.retract(nuts.id, scope=ALICE, reason="typo, it was pecans")
        secret = mm.remember(BOB_TEXTS[0], scope=BOB)
        bob_old = mm.remember(BOB_TEXTS[1], scope=BOB)
        mm.remember("My favourite restaurant is Zuma", scope=BOB)
        assert mm.require(old.id, scope=ALICE).status is Status.SUPERSEDED
        assert mm.require(bob_old.id, scope=BOB).status is Status.SUPERSEDED
        (decision,) = mm.activities(ALICE, kinds=["update_detection"])
        (bob_decision,) = mm.activities(BOB, kinds=["update_detection"])
    return {
        "store": store,
        "city": city,
        "hotel": hotel,
        "plan": plan,
        "old": old,
        "new": new,
        "nuts": nuts,
        "decision": decision.id,
        "secret": secret,
        "bob_old": bob_old,
        "bob_decision": bob_decision.id,
    }


def _client(store: Path, *, allow_writes: bool = False, user: str | None = "alice") -> tuple[TestClient, ViewerStore]:
    vs = ViewerStore(MemLineageSettings(home=store), allow_writes=allow_writes)
    return TestClient(create_app(vs, default_user=user), base_url="http://127.0.0.1:8765"), vs


@pytest.fixture
def ro(seeded: dict[str, Any]) -> Iterator[TestClient]:
    client, vs = _client(seeded["store"])
    yield client
    vs.close()


@pytest.fixture
def live_copy(seeded: dict[str, Any], tmp_path: Path) -> Path:
    """A copy of the seeded store for a test that writes (undo)."""
    copy = tmp_path / "store"
    shutil.copytree(seeded["store"], copy, ignore=shutil.ignore_patterns(".writer.lock"))
    return copy


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")


def _ledger_digest(store: Path) -> str:
    h = hashlib.sha256()
    for name in ("ledger.db", "ledger.db-wal"):
        f = store / name
        if f.exists():
            h.update(f.read_bytes())
    return h.hexdigest()


# ====================================================================== HTTP level
def test_every_page_answers_200_with_the_users_memories(ro: TestClient, seeded: dict[str, Any]) -> None:
    s = seeded
    pages = {
        "/": None,
        "/memories": None,
        "/memories?status=superseded": None,
        f"/memory/{s['hotel'].id}": None,
        f"/impact/{s['city'].id}": None,
        "/audit": None,
        "/decisions": None,
        "/static/viewer.css": None,
    }
    for url in pages:
        r = ro.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        pages[url] = r.text

    listing = pages["/memories"]
    for key in ("city", "hotel", "old", "new", "nuts"):
        assert s[key].id in listing and _escaped(s[key].content) in listing
    assert _escaped(XSS) in listing and "retracted" in listing and "superseded" in listing
    only_superseded = pages["/memories?status=superseded"]
    assert s["old"].id in only_superseded and s["new"].id not in only_superseded and s["city"].id not in only_superseded

    graph = pages[f"/memory/{s['hotel'].id}"]
    nodes = dict(re.findall(r'data-id="([0-9a-f-]{36})" data-role="(\w+)"', graph))
    assert nodes == {s["hotel"].id: "focus", s["city"].id: "ancestor", s["plan"].id: "dependent"}
    edges = set(re.findall(r'class="edge" data-from="([0-9a-f-]+)" data-to="([0-9a-f-]+)"', graph))
    assert edges == {(s["hotel"].id, s["city"].id), (s["plan"].id, s["hotel"].id), (s["plan"].id, s["city"].id)}

    impact = pages[f"/impact/{s['city'].id}"]
    suspect_table = impact.split('<table class="suspect">')[1].split("</table>")[0]
    assert s["hotel"].id in suspect_table and s["plan"].id in suspect_table

    audit = pages["/audit"]
    for etype in ("created", "superseded", "retracted"):
        assert f">{etype}</a>" in audit
    assert "typo, it was pecans" in audit

    decisions = pages["/decisions"]
    assert s["decision"] in decisions and "new value of slot user.favourite.restaurant" in decisions
    assert s["old"].id in decisions and s["new"].id in decisions
    assert 'class="undo"' not in decisions and "--allow-writes" in decisions  # read-only: no undo button


def test_json_endpoints_match_the_pages(ro: TestClient, seeded: dict[str, Any]) -> None:
    s = seeded
    mems = ro.get("/api/memories", params={"status": "active"}).json()["memories"]
    assert {m["id"] for m in mems} == {s["city"].id, s["hotel"].id, s["plan"].id, s["new"].id}
    lineage = ro.get(f"/api/memory/{s['plan'].id}").json()
    assert {m["id"] for m in lineage["ancestors"]} == {s["city"].id, s["hotel"].id} and lineage["dependents"] == []
    assert lineage["memory"]["content"] == XSS and "entity" in lineage["prov"]
    impact = ro.get(f"/api/impact/{s['city'].id}").json()
    assert {m["id"] for m in impact["suspect"]} == {s["hotel"].id, s["plan"].id}
    (d,) = ro.get("/api/decisions").json()["decisions"]
    assert (d["id"], d["decision"], d["outcome"], d["target"], d["statement"]) == (
        s["decision"], "update", "applied", s["old"].id, s["new"].id
    )  # fmt: skip
    types = {e["type"] for e in ro.get("/api/audit").json()["events"]}
    assert {"created", "superseded", "retracted"} <= types
    assert ro.get("/api/memories", params={"status": "bogus"}).status_code == 400
    assert ro.get("/api/memory/not-an-id").status_code in (400, 404)


def test_memory_text_is_escaped_everywhere(ro: TestClient, seeded: dict[str, Any]) -> None:
    s = seeded
    for url in ("/memories", f"/memory/{s['plan'].id}", f"/memory/{s['city'].id}", f"/impact/{s['city'].id}", "/audit"):
        r = ro.get(url)
        assert r.status_code == 200
        assert "<script" not in r.text.lower(), url  # the page ships no script at all, so any tag is injected
        assert "alert(&#39;pwned&#39;)" in r.text, url
        assert "default-src 'none'" in r.headers["content-security-policy"]
    assert ro.get("/api/memories").headers["content-type"].startswith("application/json")


def test_scope_isolation_one_users_pages_never_show_anothers(ro: TestClient, seeded: dict[str, Any]) -> None:
    s = seeded
    bob_ids = (s["secret"].id, s["bob_old"].id, s["bob_decision"])
    for url in ("/memories", "/audit", "/decisions", "/api/memories", "/api/audit", "/api/decisions"):
        body = ro.get(url).text  # alice, the default user
        assert not any(t in body for t in BOB_TEXTS), url
        assert not any(i in body for i in bob_ids), url
    for url in (f"/memory/{s['secret'].id}", f"/impact/{s['secret'].id}", f"/api/memory/{s['secret'].id}"):
        r = ro.get(url)
        assert r.status_code == 404 and BOB_TEXTS[0] not in r.text, url
    bob = ro.get("/memories", params={"user": "bob"}).text
    assert _escaped(BOB_TEXTS[0]) in bob and s["city"].id not in bob and "Lisbon" not in bob
    other = ro.get(f"/memory/{s['city'].id}", params={"user": "bob"})
    assert other.status_code == 404 and "Lisbon" not in other.text


def test_read_only_viewer_refuses_undo_and_never_writes(seeded: dict[str, Any]) -> None:
    store = seeded["store"]
    before = _ledger_digest(store)
    client, vs = _client(store)
    try:
        for url in ("/memories", f"/memory/{seeded['hotel'].id}", f"/impact/{seeded['city'].id}", "/decisions"):
            assert client.get(url).status_code == 200
        r = client.post(f"/decisions/{seeded['decision']}/undo", data={"csrf": "anything"})
        assert r.status_code == 403 and "--allow-writes" in r.text
        assert client.get("/api/decisions").json()["decisions"][0]["outcome"] == "applied"
    finally:
        vs.close()
    assert _ledger_digest(store) == before


def test_read_only_viewer_reads_while_an_application_writes(live_copy: Path) -> None:
    client, vs = _client(live_copy)
    try:
        assert "Porto" not in client.get("/memories").text
        with MemoryManager.open(live_copy, embedder=OnnxMiniLMEmbedder()) as app_mm:  # the app holds the store
            late = app_mm.remember("We add a day trip to Porto", scope=ALICE)
            page = client.get("/memories").text  # a fresh snapshot: the ledger changed
            assert late.id in page and "day trip to Porto" in page
    finally:
        vs.close()


def test_allow_writes_undo_needs_the_token_and_restores_the_memory(live_copy: Path, seeded: dict[str, Any]) -> None:
    s = seeded
    client, vs = _client(live_copy, allow_writes=True)
    try:
        page = client.get("/decisions").text
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token is not None and 'class="undo"' in page
        url = f"/decisions/{s['decision']}/undo?user=alice"
        assert client.post(url, data={"csrf": "wrong"}).status_code == 403
        cross = client.post(url, data={"csrf": token[1]}, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        site = client.post(url, data={"csrf": token[1]}, headers={"Sec-Fetch-Site": "cross-site"})
        assert site.status_code == 403
        # bob's decision is "not found" for alice, even with a valid token
        other = client.post(f"/decisions/{s['bob_decision']}/undo?user=alice", data={"csrf": token[1]})
        assert other.status_code == 404
        r = client.post(
            url, data={"csrf": token[1]}, headers={"Origin": "http://127.0.0.1:8765"}, follow_redirects=False
        )
        assert r.status_code == 303
        done = client.get(r.headers["location"]).text
        assert "undone" in done and s["old"].id in done
        again = client.post(url, data={"csrf": token[1]})
        assert again.status_code == 409 and "already undone" in again.text
    finally:
        vs.close()
    with MemoryManager.open(live_copy, embedder=OnnxMiniLMEmbedder()) as mm:
        assert mm.require(s["old"].id, scope=ALICE).status is Status.ACTIVE
        assert mm.get_activity(s["decision"], scope=ALICE).outcome == "undone"
        assert mm.get_activity(s["bob_decision"], scope=BOB).outcome == "applied"


def test_read_only_viewer_over_a_server_ledger_writes_nothing(pg_schema: Any) -> None:
    from sqlalchemy import create_engine, text

    with MemoryManager.open(ledger_url=pg_schema.url, index=InMemoryIndex(), embedder=FakeEmbedder()) as mm:
        city = mm.remember("I am travelling to Lisbon in May", scope=ALICE)
        hotel = mm.remember("Hotel Alfama 95 EUR", scope=ALICE, source="tool:search_hotels", derived_from=[city.id])
        mm.remember(BOB_TEXTS[0], scope=BOB)

    def state() -> tuple[Any, ...]:
        engine = create_engine(pg_schema.url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT id, status, use_count, last_used_at FROM ml_memories ORDER BY id"))
                events = conn.execute(text("SELECT count(*) FROM ml_events")).scalar()
                acts = conn.execute(text("SELECT count(*) FROM ml_activities")).scalar()
                return (tuple(map(tuple, rows)), events, acts)
        finally:
            engine.dispose()

    before = state()
    vs = ViewerStore(MemLineageSettings(ledger_url=pg_schema.url))
    try:
        client = TestClient(create_app(vs, default_user="alice"), base_url="http://127.0.0.1")
        listing = client.get("/memories").text
        assert city.id in listing and hotel.id in listing and BOB_TEXTS[0] not in listing
        graph = client.get(f"/memory/{hotel.id}").text
        assert f'data-id="{city.id}" data-role="ancestor"' in graph
        assert hotel.id in client.get(f"/impact/{city.id}").text
        for url in ("/audit", "/decisions", "/api/memories", "/api/audit", "/api/decisions"):
            assert client.get(url).status_code == 200, url
        assert client.post("/decisions/whatever/undo", data={"csrf": "x"}).status_code == 403
    finally:
        vs.close()
    assert state() == before


def test_only_local_host_headers_are_answered(seeded: dict[str, Any]) -> None:
    vs = ViewerStore(MemLineageSettings(home=seeded["store"]))
    try:
        evil = TestClient(create_app(vs, default_user="alice"), base_url="http://rebind.example")
        assert evil.get("/memories").status_code == 400  # DNS rebinding: a foreign Host is refused
    finally:
        vs.close()


def test_serve_refuses_a_missing_store_and_a_busy_port(tmp_path: Path, seeded: dict[str, Any]) -> None:
    from memlineage.cli import app
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["serve", "--path", str(tmp_path / "nope"), "--port", "0"])
    assert res.exit_code == 2 and "no MemLineage store" in res.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = CliRunner().invoke(app, ["serve", "--path", str(seeded["store"]), "--port", str(port)])
    assert res.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in res.output


# ====================================================================== real browser
def _chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installed with apt-get when missing (as root); else skip."""

    def found() -> tuple[str, str] | None:
        browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
        return (browser, driver) if browser and driver else None

    if (paths := found()) is not None:
        return paths
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium/chromium-driver missing and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q", "chromium", "chromium-driver"]
    log = ""
    for cmd in (install, ["apt-get", "-o", "DPkg::Lock::Timeout=300", "update", "-q"], install):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
        log = (proc.stdout + proc.stderr)[-600:]
        if cmd is install and proc.returncode == 0 and found():
            break
    if (paths := found()) is None:
        pytest.skip(f"could not install chromium and chromium-driver with apt-get: {log}")
    return paths


def _start_viewer(store: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """``memlineage serve --port 0`` as a process; returns it and the URL it printed."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "core")])}
    cli = [sys.executable, "-c", "from memlineage.cli import app; app()"]  # the `memlineage` console script
    args = ["serve", "--path", str(store), "--user", "alice", "--port", "0", *extra]
    proc = subprocess.Popen([*cli, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines.append(proc.stdout.readline())
        if m := re.search(r"(http://127\.0\.0\.1:\d+)/", lines[-1]):
            return proc, m[1]
        if not lines[-1] and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"memlineage serve did not start: {''.join(lines)}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_in_a_real_browser(
    seeded: dict[str, Any], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture
) -> None:
    browser, driver_path = _chromium()
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    s = seeded
    # pytest keeps only its last few temporary directories: MEMLINEAGE_VIEWER_SCREENSHOTS names a lasting one
    keep = os.environ.get("MEMLINEAGE_VIEWER_SCREENSHOTS")
    shots = Path(keep) if keep else tmp_path_factory.mktemp("viewer-screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    live = tmp_path / "live"
    shutil.copytree(s["store"], live, ignore=shutil.ignore_patterns(".writer.lock"))
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
        "--disable-extensions",
    ):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager never downloads (the driver path is given anyway)
    ro_proc, ro_url = _start_viewer(s["store"])
    live_proc, live_url = _start_viewer(live, "--allow-writes")
    drv = webdriver.Chrome(options=opts, service=Service(executable_path=driver_path))
    saved: list[Path] = []
    seen: set[str] = set()

    def visit(url: str, name: str) -> str:
        drv.get(url)
        assert drv.find_element(By.TAG_NAME, "h1").text, url
        saved.append(shots / f"{name}.png")
        drv.save_screenshot(str(saved[-1]))
        src = drv.page_source
        foreign = [u for u in re.findall(r"https?://[^\s\"'<>]+", src) if urlsplit(u).hostname != "127.0.0.1"]
        assert not foreign, (url, foreign)
        for entry in drv.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                seen.add(msg["params"]["request"]["url"])
        return src

    try:
        visit(f"{ro_url}/memories", "memories")
        rows = drv.find_elements(By.CSS_SELECTOR, "table.memories tbody tr")
        texts = " ".join(r.text for r in rows)
        for key in ("city", "hotel", "old", "new", "nuts"):
            assert s[key].content in texts
        assert XSS in texts  # shown as text, never run
        with pytest.raises(NoAlertPresentException):
            drv.switch_to.alert.text  # noqa: B018
        assert not any(t in drv.page_source for t in BOB_TEXTS)

        visit(f"{ro_url}/memory/{s['hotel'].id}", "graph")
        svg = drv.find_element(By.CSS_SELECTOR, "svg#lineage")
        assert svg.size["width"] > 200 and svg.size["height"] > 150
        roles = {
            n.get_attribute("data-id"): n.get_attribute("data-role")
            for n in drv.find_elements(By.CSS_SELECTOR, "svg#lineage a.node")
        }
        assert roles == {s["hotel"].id: "focus", s["city"].id: "ancestor", s["plan"].id: "dependent"}
        assert len(drv.find_elements(By.CSS_SELECTOR, "svg#lineage path.edge")) == 3
        # premises are drawn above the memory, dependents below
        y = {i: drv.find_element(By.CSS_SELECTOR, f'a.node[data-id="{i}"] rect').location["y"] for i in roles}
        assert y[s["city"].id] < y[s["hotel"].id] < y[s["plan"].id]

        visit(f"{ro_url}/impact/{s['city'].id}", "impact")
        suspect = drv.find_element(By.CSS_SELECTOR, "table.suspect").text
        assert s["hotel"].content in suspect and s["plan"].content in suspect

        visit(f"{ro_url}/audit", "audit")
        assert "typo, it was pecans" in drv.find_element(By.CSS_SELECTOR, "table.audit").text

        visit(f"{ro_url}/decisions", "decisions-read-only")
        assert not drv.find_elements(By.CSS_SELECTOR, "button.undo")
        assert "new value of slot user.favourite.restaurant" in drv.find_element(By.TAG_NAME, "main").text

        # the undo button of a viewer started with --allow-writes, clicked as a user would (CSRF token, same origin)
        visit(f"{live_url}/decisions", "decisions-allow-writes")
        undo = drv.find_element(By.CSS_SELECTOR, f'tr[data-id="{s["decision"]}"] button.undo')
        undo.click()
        # the page the button was on goes first (its own h1 must not count as the answer on a loaded machine)
        WebDriverWait(drv, 10).until(expected_conditions.staleness_of(undo))
        WebDriverWait(drv, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "p.ok, p.error, h1"))
        ok = drv.find_element(By.CSS_SELECTOR, "p.ok").text if drv.find_elements(By.CSS_SELECTOR, "p.ok") else ""
        assert ok, drv.find_element(By.TAG_NAME, "main").text
        assert "undone" in ok and "Din Tai Fung" in ok and "active again" in ok
        saved.append(shots / "decisions-after-undo.png")
        drv.save_screenshot(str(saved[-1]))
        assert not drv.find_elements(By.CSS_SELECTOR, "button.undo")
    finally:
        drv.quit()
        _stop(ro_proc)
        _stop(live_proc)
    hosts = {urlsplit(u).hostname for u in seen if not u.startswith(("data:", "about:"))}
    assert seen and hosts == {"127.0.0.1"}, seen
    for p in saved:
        assert p.stat().st_size > 5000
    with capsys.disabled():
        print("\nviewer screenshots:\n" + "\n".join(f"  {p}" for p in saved))
    with MemoryManager.open(live, embedder=OnnxMiniLMEmbedder()) as mm:
        assert mm.require(s["old"].id, scope=ALICE).status is Status.ACTIVE
