"""state.wire, the commands' Redis client, without a server: it has every command the state
layer calls, it parses RESP as hiredis does, and a command imports no redis-py. (Its replies
against a real redis-server and redis-py: tests/integration/test_wire.py.)"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import minihpc.state
from minihpc.cli import main as cli_main
from minihpc.state import resp, wire

STATE = Path(minihpc.state.__file__).parent
RECEIVERS = {"self.r", "pipe", "r", "client", "self.client"}
"""What the state layer names a Redis client or pipeline."""


def _called(receivers=RECEIVERS) -> dict[str, str]:
    """Method name -> where: every call on a Redis client or pipeline in minihpc.state."""
    found = {}
    for path in sorted(STATE.glob("*.py")):
        if path.name.startswith(("wire", "resp")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and ast.unparse(node.func.value) in receivers:
                found.setdefault(node.func.attr, f"{path.name}:{node.lineno}")
    return found


def test_the_client_and_its_pipeline_have_every_command_the_state_layer_calls():
    called = _called()
    assert {"hgetall", "pipeline", "execute", "watch", "multi"} <= set(called)  # the scan sees them
    missing = {name: where for name, where in called.items()
               if not (hasattr(wire.Client, name) or hasattr(wire.Pipeline, name))}
    assert not missing, f"state.wire lacks commands the state layer calls: {missing}"


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_the_pure_python_reader_parses_what_hiredis_parses(chunk):
    hiredis = pytest.importorskip("hiredis")
    data = (b"+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n*3\r\n$1\r\na\r\n*2\r\n:1\r\n$0\r\n\r\n$-1\r\n"
            b"-ERR wrong\r\n*2\r\n+QUEUED\r\n-WRONGTYPE no\r\n")
    replies = []
    for reader in (resp.Reader(replyError=wire.ResponseError), hiredis.Reader(replyError=wire.ResponseError)):
        got = []
        for i in range(0, len(data), chunk):
            reader.feed(data[i:i + chunk])
            while (reply := reader.gets()) is not False:
                got.append(reply)
        replies.append([repr(r) if isinstance(r, Exception) or isinstance(r, list) and any(
            isinstance(x, Exception) for x in r) else r for r in got])
    assert replies[0] == replies[1]
    assert replies[0][:6] == [b"OK", 42, b"hello", None, None, [b"a", [1, b""], None]]


def test_commands_are_packed_as_redis_py_packs_them():
    assert wire.pack(("SET", "k", b"v\r\n", 3, 1.5, "é")) == (
        b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n$1\r\n3\r\n$3\r\n1.5\r\n$2\r\n\xc3\xa9\r\n")


def test_the_command_table_names_every_subcommand_of_the_full_parser():
    parser = cli_main.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert set(sub.choices) == set(cli_main.COMMANDS)
    for command, group in cli_main.COMMANDS.items():
        alone = cli_main.build_parser(command)
        (only,) = [a for a in alone._actions if a.dest == "command"]
        assert command in only.choices, (command, group)


@pytest.mark.parametrize("argv,command", [
    (["queue", "-u", "bob"], "queue"),
    (["--config", "c.toml", "submit", "x.py"], "submit"),
    (["--redis-url", "redis://h", "--debug", "cancel", "3"], "cancel"),
    (["--help", "queue"], None),  # the top help lists every command
    (["--version"], None),
    (["qeueu"], None),  # argparse names the choices
    ([], None),
])
def test_a_call_builds_only_its_own_command(argv, command):
    assert cli_main.command_of(argv) == command


def test_a_command_imports_no_redis_py():
    probe = ("import sys; import minihpc.cli.main, minihpc.cli.jobs, minihpc.cli.submit, minihpc.cli.slurm, "
             "minihpc.state.store; print(sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'rq')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("url,problem", [
    ("http://127.0.0.1:6379/0", "starts with redis://"),
    ("redis://127.0.0.1:6379/zero", "database must be a number, not 'zero'"),
])
def test_a_url_that_is_not_redis_is_one_line_before_connecting(url, problem):
    from minihpc.core.errors import ClusterUnavailable
    from minihpc.state.connect import connect_command

    with pytest.raises(ClusterUnavailable, match=f"the Redis URL .* is not valid: .*{problem}"):
        connect_command(url)
