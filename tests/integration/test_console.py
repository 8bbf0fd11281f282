"""The console's routes on a real broker: the modes, its API, and its security headers."""

from __future__ import annotations

from yarl import URL

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready


async def _client(factory: ClientFactory, make_settings: SettingsFactory, mode: str) -> Client:
    client = await factory(create_app(make_settings(console=mode)))
    await wait_ready(client)
    return client


async def test_off_answers_404_everywhere_under_ui(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await _client(aiohttp_client, make_settings, "off")
    for path in ("/ui", "/ui/", "/ui/js/app.js", "/ui/api/buckets"):
        response = await client.get(path)
        assert response.status == 404, path
        assert (await response.json())["error"]["code"] == "not_found"


async def test_read_only_mode_is_announced_and_files_carry_csp(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await _client(aiohttp_client, make_settings, "ro")
    assert await (await client.get("/ui/api/config")).json() == {"mode": "ro"}
    index = await client.get("/ui/")
    assert index.status == 200
    assert index.headers["Content-Type"] == "text/html; charset=utf-8"
    assert index.headers["Content-Security-Policy"].startswith("default-src 'self';")
    assert index.headers["X-Content-Type-Options"] == "nosniff"
    redirect = await client.get("/ui", allow_redirects=False)
    assert (redirect.status, redirect.headers["Location"]) == (308, "/ui/")
    for path in ("/ui/nothing.js", "/ui/js/%2e%2e/%2e%2e/app.py", "/ui/js/..%2fapp.js"):
        missing = await client.get(URL(path, encoded=True))
        assert missing.status == 404, path
    unknown = await client.get("/ui/api/streams")
    assert (await unknown.json())["error"]["code"] == "not_found"


async def test_api_lists_buckets_and_fork_lineage(client: Client, unique: str) -> None:
    bucket = f"con-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    text = {"Content-Type": "text/plain"}
    assert (await client.put(f"/{bucket}/source", headers=text)).status == 201
    written = await client.post(f"/{bucket}/source", data=b"one", headers=text)
    cut = written.headers["Stream-Next-Offset"]
    fork = {**text, "Stream-Forked-From": f"/{bucket}/source", "Stream-Fork-Offset": cut}
    made = await client.put(f"/{bucket}/child", headers=fork)
    assert made.status == 201, await made.text()
    assert (
        await client.put(
            f"/{bucket}/grandchild", headers={**text, "Stream-Forked-From": f"/{bucket}/child"}
        )
    ).status == 201

    listed = await (await client.get("/ui/api/buckets")).json()
    assert {"bucket_id": bucket, "streams": 3} in listed["buckets"]

    lineage = await (await client.get(f"/ui/api/stream/{bucket}/grandchild")).json()
    assert [s["stream_id"] for s in lineage["sources"]] == ["grandchild", "child"]
    assert [s["forked_from"] for s in lineage["sources"]] == ["child", "source"]
    assert lineage["sources"][1]["fork_offset"] == cut
    assert lineage["forks"] == []
    assert lineage["topic"].endswith(bucket)
    source = await (await client.get(f"/ui/api/stream/{bucket}/source")).json()
    assert [f["stream_id"] for f in source["forks"]] == ["child"]
    assert source["sources"] == []

    missing = await client.get(f"/ui/api/stream/{bucket}/nope")
    assert missing.status == 404
    bad = await client.get("/ui/api/stream/UP/x")
    assert (await bad.json())["error"]["code"] == "invalid_bucket_id"
