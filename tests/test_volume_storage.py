"""The emulator's volume storage from the wire: the transfer route (prime 0.18.0 ``route_volume_transfer``)
and the S3 side, read with boto3 as ``prime volumes`` reads it. Each refusal is S3's own."""

from __future__ import annotations

import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from skill.emulator import OTHER_API_KEY, TEAM_EVALS_ID, TEAM_RESEARCH_ID, EmulatorServer, Timing

T = Timing()


@pytest.fixture(scope="module")
def emu():
    with EmulatorServer(speed=0) as server:
        yield server


def route(emu: EmulatorServer, volume: str = "research-data", team: str | None = TEAM_RESEARCH_ID,
          key: str | None = None, **body) -> httpx.Response:
    payload = {"mode": "get", "path": "", **({"teamId": team} if team else {}), **body}
    return httpx.post(f"{emu.base_url}/api/v1/training/volumes/{volume}/transfer", json=payload,
                      headers={"Authorization": f"Bearer {key or emu.api_key}"})


def s3(answer: dict, *, secret: str | None = None, key_id: str | None = None):
    import boto3

    return boto3.client("s3", endpoint_url=answer["endpoint"], region_name="auto",
                        aws_access_key_id=key_id or answer["accessKeyId"],
                        aws_secret_access_key=secret or answer["secretAccessKey"],
                        aws_session_token=answer["sessionToken"],
                        config=Config(signature_version="s3v4", retries={"total_max_attempts": 1}))


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_get_route_hands_out_scoped_expiring_credentials_for_the_volume(emu):
    answer = route(emu).json()
    assert answer["via"] == "r2" and answer["bucket"] == "mf-emulator-volumes"
    assert answer["prefix"] == f"volumes/{TEAM_RESEARCH_ID}/research-data/" and answer["endpoint"].endswith("/_s3")
    expires = emu.state.clock.from_iso(answer["expiresAt"]) - emu.state.now()
    assert abs(expires - T.credential_seconds) < 1
    assert route(emu).json()["accessKeyId"] != answer["accessKeyId"]  # new credentials on every call


@pytest.mark.parametrize(("kwargs", "status"), [
    ({"volume": "no-such-volume"}, 404), ({"mode": "put"}, 400), ({"mode": "sync"}, 422), ({"path": "a/../.."}, 400),
    ({"team": TEAM_EVALS_ID, "key": OTHER_API_KEY}, 403), ({"team": None}, 404)])
def test_the_route_refuses_what_the_platform_refuses(emu, kwargs, status):
    assert route(emu, **kwargs).status_code == status


def test_requests_signed_wrong_or_outside_the_volume_are_refused(emu):
    answer = route(emu).json()
    bucket, prefix = answer["bucket"], answer["prefix"]
    assert s3(answer).list_objects_v2(Bucket=bucket, Prefix=prefix)["KeyCount"] == 0
    with pytest.raises(ClientError) as wrong:
        s3(answer, secret="fake-wrong-secret-0000").list_objects_v2(Bucket=bucket, Prefix=prefix)
    with pytest.raises(ClientError) as unknown:
        s3(answer, key_id="MFEMUNOSUCHKEY0000").list_objects_v2(Bucket=bucket, Prefix=prefix)
    with pytest.raises(ClientError) as outside:
        s3(answer).list_objects_v2(Bucket=bucket, Prefix=f"volumes/{TEAM_EVALS_ID}/evals-data/")
    with pytest.raises(ClientError) as other_bucket:
        s3(answer).list_objects_v2(Bucket="another-bucket", Prefix=prefix)
    assert (code(wrong), code(unknown), code(outside), code(other_bucket)) == \
        ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "NoSuchBucket")


def test_credentials_expire_on_the_simulated_clock(emu):
    answer = route(emu).json()
    client = s3(answer)
    client.list_objects_v2(Bucket=answer["bucket"], Prefix=answer["prefix"])
    emu.state.advance(T.credential_seconds)
    with pytest.raises(ClientError) as expired:
        client.list_objects_v2(Bucket=answer["bucket"], Prefix=answer["prefix"])
    assert code(expired) == "ExpiredToken"
    fresh = route(emu).json()
    assert s3(fresh).list_objects_v2(Bucket=fresh["bucket"], Prefix=fresh["prefix"])["KeyCount"] == 0


def test_objects_page_by_continuation_and_ranges_and_etags_hold(emu):
    for i in range(7):
        emu.state.put_object("research-data", f"pages/{i}.bin", bytes([i]) * (100 + i), team_id=TEAM_RESEARCH_ID)
    answer = route(emu).json()
    client, bucket, prefix = s3(answer), answer["bucket"], answer["prefix"]
    keys, token = [], None
    while True:
        page = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "pages/", MaxKeys=3,
                                      **({"ContinuationToken": token} if token else {}))
        keys += [o["Key"] for o in page["Contents"]]
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    assert keys == [f"{prefix}pages/{i}.bin" for i in range(7)]
    folders = client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
    assert [p["Prefix"] for p in folders["CommonPrefixes"]] == [prefix + "pages/"]
    got = client.get_object(Bucket=bucket, Key=prefix + "pages/3.bin", Range="bytes=100-102")
    assert got["Body"].read() == bytes([3]) * 3 and got["ContentRange"] == "bytes 100-102/103"
    with pytest.raises(ClientError) as changed:
        client.get_object(Bucket=bucket, Key=prefix + "pages/3.bin", IfMatch='"0123456789abcdef0123456789abcdef"')
    with pytest.raises(ClientError) as missing:
        client.get_object(Bucket=bucket, Key=prefix + "pages/none.bin")
    assert (code(changed), code(missing)) == ("PreconditionFailed", "NoSuchKey")


def test_a_live_session_routes_reads_through_it(emu):
    prefix = emu.state.volume_prefix("research-data", TEAM_RESEARCH_ID)
    emu.state.storage.open_session(prefix)
    try:
        answer = route(emu).json()
    finally:
        emu.state.storage.open_session(prefix, is_open=False)
    assert answer["via"] == "session" and answer["session"]["volumeName"] == "research-data"
    assert "accessKeyId" not in answer and route(emu).json()["via"] == "r2"
