"""The users file and `obda users add | list | remove`: hashed tokens, shown once, checked in constant time."""

from __future__ import annotations

import json
import stat
import time

from typer.testing import CliRunner

import api.users as users_module
from api.users import LEGACY_ADMIN, UserDirectory, add_user, read_users, remove_user
from obda.cli import app as cli_app

from apikit import DEMO, TOKEN


def run(*args: str):
    return CliRunner().invoke(cli_app, list(args))


def test_users_add_prints_the_token_once_and_stores_only_a_salted_hash(tmp_path):
    path = tmp_path / "state" / "users.json"
    r = run("users", "add", "alice", "--role", "operator", "--users-file", str(path))
    assert r.exit_code == 0, r.output
    token = r.stdout.strip().splitlines()[-1]
    assert token.startswith("obda_") and len(token) > 40
    text = path.read_text()
    assert token not in text and token.split("_", 2)[2] not in text
    entry = json.loads(text)["users"]["alice"]
    assert entry["role"] == "operator" and entry["kdf"] == "scrypt" and len(bytes.fromhex(entry["salt"])) == 16
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = add_user(path, "bob", "operator")
    assert read_users(path)["bob"]["salt"] != entry["salt"]  # a salt per user
    listed = run("users", "list", "--users-file", str(path))
    assert listed.exit_code == 0
    lines = [line.split("\t") for line in listed.stdout.strip().splitlines()]
    assert [(n, role) for n, role, *_ in lines] == [("alice", "operator"), ("bob", "operator")]
    assert token not in listed.output and second not in listed.output and entry["hash"] not in listed.output
    directory = UserDirectory(path, None)
    assert directory.authenticate(token).name == "alice" and directory.authenticate(second).name == "bob"


def test_users_refused_with_a_message(tmp_path):
    path = tmp_path / "users.json"
    assert run("users", "add", "alice", "--role", "reader", "--users-file", str(path)).exit_code == 0
    for args, words in [
        (["users", "add", "alice", "--role", "admin"], "exists already"),
        (["users", "add", LEGACY_ADMIN, "--role", "admin"], "reserved"),
        (["users", "add", "a b", "--role", "admin"], "not valid"),
        (["users", "remove", "nobody"], "no user 'nobody'"),
    ]:
        r = run(*args, "--users-file", str(path))
        assert r.exit_code == 2 and words in r.output, r.output
        assert "Traceback" not in r.output
    assert run("users", "add", "x", "--role", "root", "--users-file", str(path)).exit_code == 2
    path.write_text("{not json")
    r = run("users", "list", "--users-file", str(path))
    assert r.exit_code == 2 and "cannot read the users file" in r.output


def test_a_token_is_checked_against_its_own_hash(tmp_path):
    path = tmp_path / "users.json"
    alice = add_user(path, "alice", "operator")
    bob = add_user(path, "bob", "reader", rate_limit=10)
    d = UserDirectory(path, TOKEN)
    assert d.authenticate(TOKEN).name == LEGACY_ADMIN and d.authenticate(TOKEN).role == "admin"
    assert d.authenticate(bob).role == "reader" and d.authenticate(bob).rate_limit == 10
    key_id = alice.split("_")[1]
    forged = f"obda_{key_id}_" + bob.split("_", 2)[2]  # alice's key id, bob's secret
    assert d.authenticate(forged) is None
    assert d.authenticate(alice[:-1] + ("A" if alice[-1] != "A" else "B")) is None
    assert d.authenticate(alice).name == "alice"  # a failure is not remembered as a success
    assert d.authenticate("") is None and d.authenticate(TOKEN + "x") is None
    assert UserDirectory(path, None).authenticate(TOKEN) is None  # without --token there is no legacy admin


def test_the_service_sees_removals_and_fails_closed_on_a_broken_file(tmp_path, monkeypatch):
    monkeypatch.setattr(users_module, "RECHECK_SECONDS", 0.1)  # it looks at the file ten times a second
    path = tmp_path / "users.json"
    alice = add_user(path, "alice", "operator")
    bob = add_user(path, "bob", "operator")
    d = UserDirectory(path, TOKEN)
    assert d.authenticate(alice) and d.authenticate(bob)
    remove_user(path, "alice")
    time.sleep(0.15)
    assert d.authenticate(alice) is None and d.authenticate(bob).name == "bob"  # remembered successes forgotten
    assert d.user("alice") is None
    path.write_text("{broken")
    time.sleep(0.15)
    assert d.authenticate(bob) is None  # refused until the file is fixed
    assert d.authenticate(TOKEN).name == LEGACY_ADMIN  # the service's own token still works


def test_serve_refuses_an_unreadable_users_file(tmp_path):
    path = tmp_path / "users.json"
    path.write_text('{"version": 1, "users": {"eve": {"role": "god"}}}')
    r = run("serve", "--project", str(DEMO), "--users-file", str(path))
    assert r.exit_code == 2 and "not a valid entry" in r.output and "Traceback" not in r.output
