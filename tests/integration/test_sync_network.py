"""The network step's sockets reach the supervisor in one message (issue 19).

The sandbox's pid 1 makes the DNS stub's or the proxy's listening sockets
and the unix socket guard's NETLINK_SOCK_DIAG socket in its own network
namespace and sends them all in one SCM_RIGHTS message (child.c
send_network; each used to be a message of its own). The supervisor checks
each descriptor against the kind the message gives it, in order, and the
count against the descriptors that came (supervisor.c take_network). These
tests play a pid 1 that lies (a test hook, BRIG_TEST_FORGE_NETWORK) and
check on the host that the run fails with a located error, exit 125
(that a truthful run's sockets all work is test_dns*, test_egress* and
test_unix_sockets).
"""
import re
import subprocess

import pytest


def attack(ident, technique, control):
    """Mark a test as catalogue entry IDENT (the table's row)."""
    return pytest.mark.escape(ident, technique, control)


FORGED = {
    # a descriptor more than the message declares
    "count": "network: the sandbox sent N sockets for N - 1",
    # a kind no proxy listener has
    "kind": "network: unknown proxy listener kind 99",
    # a UDP socket where the guard's socket list belongs
    "diag": "unix socket guard: not a NETLINK_SOCK_DIAG socket",
}


@attack("net-message-forged", "pid 1 lies about the network step's sockets (a test hook): more descriptors than it "
        "declares, a listener kind no proxy has, a UDP socket in the unix guard's place",
        "the supervisor checks the count, then each descriptor against its kind in order (a listener's type, "
        "the guard's AF_NETLINK/NETLINK_SOCK_DIAG): the run fails, exit 125, the error names the step")
@pytest.mark.parametrize("forge", sorted(FORGED))
def test_a_forged_network_message_fails_the_run(brig, hooks_bindir, forge):
    env = brig.env({"BRIG_TEST_FORGE_NETWORK": forge})
    cmd = brig.prefix() + [str(hooks_bindir / "brig"), "run", "--", "true"]
    p = subprocess.run(cmd, cwd=brig.workspace, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 125, f"ATTACK WORKED: the supervisor took a forged message ({p.returncode}, {p.stderr})"
    if forge == "count":
        m = re.search(r"network: the sandbox sent (\d+) sockets for (\d+)", p.stderr)
        assert m and int(m[1]) == int(m[2]) + 1, p.stderr
    else:
        assert FORGED[forge] in p.stderr, p.stderr
