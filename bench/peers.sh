# bench/peers.sh — how each sandbox is started, in one place, so every
# benchmark (bench/peers, bench/footprint) and docs/benchmarks.md use the
# same command lines. Sourced, not run.
#
#   BRIG=/abs/brig SCRATCH=/tmp/x WS=/tmp/x/ws; . bench/peers.sh; peers_setup
#   peer_argv bwrap /bin/true; "${PEER_ARGV[@]}"
#
# Kinds (those whose tool is installed; peers_setup says which are not):
#   bare      the command itself
#   brig      brig run, default profile (own cgroup: 4G memory, 1024 pids;
#             seccomp, Landlock, no network)
#   brig-rootless  the same as the user nobody (setpriv), when run as root
#   bwrap     bubblewrap with brig's filesystem layout (read-only /usr /etc
#             /opt, the host's /bin /lib* /sbin, new /proc and /dev, tmpfs
#             /tmp and $HOME, the workspace read-write), --unshare-all
#             --die-with-parent --new-session; bwrap has no seccomp filter or
#             limits of its own unless given one
#   firejail  firejail's default profile, named (--profile=default: as root
#             firejail would otherwise pick server.profile, whose private /tmp
#             hides the workspace): caps.drop all, nonewprivs, noroot,
#             seccomp, its blacklists; --net=none
#   firejail-noprofile   firejail --noprofile --net=none (startup only)
#   crun      an OCI bundle made here: `crun spec` defaults (pid, network,
#             ipc, uts, mount namespaces; three capabilities; no seccomp
#             profile: that comes from the engine above crun), brig's layout
#             as read-only bind mounts, memory 4G and pids 1024 like brig.
#             On a hybrid cgroup host crun 1.8 refuses to run ("cgroups in
#             hybrid mode not supported"), so it runs in a private mount
#             namespace with the controller-less cgroup2 mount hidden
#             (unshare -m, then umount there): part of its measured time.
#   brig-gvisor  brig run --wall gvisor (docs/walls.md): the same policy
#             and cgroup, the command under runsc inside brig's sandbox;
#             measured when runsc is installed
#   runsc     gVisor: runsc do --network=none --ignore-cgroups (no limits);
#             the Debian 12 package, whose default platform is ptrace
# Workspace: WS (absolute) is the current directory and is shared read-write
# with every sandbox, at the same path.

PEER_KINDS=()      # what peers_setup found, in table order
PEER_NOTES=()      # lines to print: what is missing and why
PEER_ARGV=()       # set by peer_argv

_bwrap_layout=()

peers_setup() {
        PEER_KINDS=(bare brig)
        # As root, brig is also measured rootless, as the unprivileged user
        # nobody: what a user without root gets on this host.
        if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
                PEER_KINDS+=(brig-rootless)
        fi
        if command -v bwrap >/dev/null; then
                _bwrap_layout=()
                local d
                for d in /usr /etc /opt; do
                        [ -d "$d" ] && _bwrap_layout+=(--ro-bind "$d" "$d")
                done
                for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
                        if [ -L "$d" ]; then
                                _bwrap_layout+=(--symlink "$(readlink "$d")" "$d")
                        elif [ -d "$d" ]; then
                                _bwrap_layout+=(--ro-bind "$d" "$d")
                        fi
                done
                PEER_KINDS+=(bwrap)
        else
                PEER_NOTES+=("bwrap: not installed (Debian: bubblewrap)")
        fi
        if command -v firejail >/dev/null; then
                PEER_KINDS+=(firejail firejail-noprofile)
        else
                PEER_NOTES+=("firejail: not installed (Debian: firejail)")
        fi
        if command -v crun >/dev/null; then
                _crun_wrapper
                PEER_KINDS+=(crun)
        else
                PEER_NOTES+=("crun: not installed (Debian: crun)")
        fi
        if command -v runsc >/dev/null; then
                PEER_KINDS+=(brig-gvisor runsc)
        else
                PEER_NOTES+=("runsc (gVisor): not installed (Debian 12: runsc)")
        fi
}

# The crun wrapper: BUNDLE ID. On a hybrid host, hide the cgroup2 mount in
# a private mount namespace (crun then uses the v1 controllers, as brig
# does); the container's state and cgroup are removed when it ends.
_crun_wrapper() {
        local hybrid=0
        if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
                hybrid=1
        fi
        cat >"$SCRATCH/crun-run" <<EOF
#!/bin/sh
# crun run BUNDLE as container ID$([ $hybrid = 1 ] && echo ", the hybrid host's cgroup2 mount hidden")
EOF
        if [ $hybrid = 1 ]; then
                cat >>"$SCRATCH/crun-run" <<'EOF'
exec unshare -m --propagation private sh -c 'umount -l /sys/fs/cgroup/unified && exec crun run --bundle "$0" "$1"' "$1" "$2"
EOF
        else
                cat >>"$SCRATCH/crun-run" <<'EOF'
exec crun run --bundle "$1" "$2"
EOF
        fi
        chmod 755 "$SCRATCH/crun-run"
}

# An OCI bundle running ARGS in WS: crun spec's defaults plus brig's layout.
_crun_bundle() {
        local key b
        key=$(printf '%s\0' "$@" | md5sum | cut -c1-12)
        b=$SCRATCH/crun-$key
        if [ ! -f "$b/config.json" ]; then
                mkdir -p "$b/rootfs"
                local d
                for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
                        if [ -L "$d" ]; then
                                ln -s "$(readlink "$d")" "$b/rootfs$d"
                        elif [ -d "$d" ]; then
                                mkdir -p "$b/rootfs$d"
                        fi
                done
                local rootless=
                [ "$(id -u)" = 0 ] || rootless=--rootless
                (cd "$b" && crun spec $rootless)
                /usr/bin/python3 - "$b/config.json" "$WS" "$HOME" "$@" <<'EOF'
import json, os, sys
path, ws, home, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = json.load(open(path))
c["process"]["args"] = args
c["process"]["terminal"] = False
c["process"]["cwd"] = ws
c["root"]["readonly"] = True
binds = [d for d in ("/usr", "/etc", "/opt") if os.path.isdir(d)]
binds += [d for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
          if os.path.isdir(d) and not os.path.islink(d)]
for d in binds:
    c["mounts"].append({"destination": d, "type": "bind", "source": d,
                        "options": ["rbind", "ro", "nosuid", "nodev"]})
for d in ("/tmp", home):
    c["mounts"].append({"destination": d, "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "nodev", "mode=1777"]})
c["mounts"].append({"destination": ws, "type": "bind", "source": ws, "options": ["rbind", "rw"]})
res = c["linux"].setdefault("resources", {})
if os.getuid() == 0:   # rootless crun cannot set limits without a delegated cgroup
    res["memory"] = {"limit": 4 << 30, "swap": 4 << 30}
    res["pids"] = {"limit": 1024}
json.dump(c, open(path, "w"), indent=2)
EOF
        fi
        echo "$b"
}

_crun_seq=0
# peer_argv KIND ARGS... — PEER_ARGV becomes the command line running ARGS
# (absolute paths) in sandbox KIND, the current directory being WS.
peer_argv() {
        local kind=$1
        shift
        case $kind in
        bare)   PEER_ARGV=("$@") ;;
        brig)   PEER_ARGV=("$BRIG" run -- "$@") ;;
        brig-gvisor) PEER_ARGV=("$BRIG" run --wall gvisor -- "$@") ;;
        brig-rootless) PEER_ARGV=(setpriv --reuid=nobody --regid=nogroup --clear-groups "$BRIG" run -- "$@") ;;
        bwrap)  PEER_ARGV=(bwrap --unshare-all --die-with-parent --new-session "${_bwrap_layout[@]}"
                           --proc /proc --dev /dev --tmpfs /tmp --tmpfs "$HOME" --bind "$WS" "$WS"
                           --chdir "$WS" "$@") ;;
        firejail) PEER_ARGV=(firejail --quiet --profile=default --net=none "$@") ;;
        firejail-noprofile) PEER_ARGV=(firejail --quiet --noprofile --net=none "$@") ;;
        crun)   _crun_seq=$((_crun_seq + 1))
                PEER_ARGV=("$SCRATCH/crun-run" "$(_crun_bundle "$@")" "brig-bench-$$-${CRUN_ID:-$_crun_seq}") ;;
        runsc)  if [ "$(id -u)" = 0 ]; then
                        PEER_ARGV=(runsc --network=none --ignore-cgroups do "$@")
                else
                        PEER_ARGV=(runsc --rootless --network=none --ignore-cgroups do "$@")
                fi ;;
        *)      echo "peer_argv: unknown kind $kind" >&2; return 1 ;;
        esac
}

# Remove what crun may have left when a benchmark was interrupted.
peers_cleanup() {
        if command -v crun >/dev/null; then
                local id
                for id in $(crun list -q 2>/dev/null | grep "^brig-bench-$$-" || true); do
                        crun delete -f "$id" >/dev/null 2>&1 || true
                done
        fi
}
