#!/bin/sh
# untrusted.sh — stands in for code an agent runs without reading it: a
# build script from a freshly cloned repository, say, that also tries to
# steal credentials and break out. demo/run-demo runs it inside brig.
#
# Each attempt prints one line, "ATTEMPT what: BLOCKED (why)" or
# "ATTEMPT what: SUCCEEDED (!!)"; then the script does its real work in the
# workspace, which must succeed. Exit status: 0 when every attempt was
# blocked and the work was done, 1 otherwise.
#
# Plain POSIX sh. From run-demo it gets: HOME (the fake home), DEMO_HOMES
# (where the fake home's parent directory is granted read-only), DEMO_MARKER
# (a string only the planted secrets contain), DEMO_PORT (a port the demo
# listens on, on the host's 127.0.0.1) and DEMO_HOST_PID (a host process).

set -u
succeeded=0
attempts=0

blocked() { attempts=$((attempts + 1)); echo "ATTEMPT $1: BLOCKED ($2)"; }
succeeded() { attempts=$((attempts + 1)); succeeded=$((succeeded + 1)); echo "ATTEMPT $1: SUCCEEDED (!!) $2"; }

# The error text of a failed command, without the "cat: PATH: " prefix.
why() { sed -n '1{s/^.*: //;p;}'; }

# -- steal secrets -----------------------------------------------------------
try_read() {  # what, path, what the sandbox shows there instead
        out=$(cat "$2" 2>/tmp/err)
        case $out in
        *"$DEMO_MARKER"*|*root:*) succeeded "$1" "read: $(echo "$out" | head -n 1)" ;;
        "") if [ -s /tmp/err ]; then blocked "$1" "$(why </tmp/err): $3"
            else blocked "$1" "the file reads empty: brig hid it"; fi ;;
        *) blocked "$1" "got $(printf %s "$out" | wc -c) bytes without the secret" ;;
        esac
}
user=$(basename "$HOME")
try_read "read ~/.ssh/id_ed25519 via \$HOME" "$HOME/.ssh/id_ed25519" "\$HOME is a fresh empty tmpfs"
try_read "read ~/.ssh/id_ed25519 via the granted parent" "$DEMO_HOMES/$user/.ssh/id_ed25519" \
        "$DEMO_HOMES/$user/.ssh is an empty mask"
try_read "read ~/.aws/credentials via the granted parent" "$DEMO_HOMES/$user/.aws/credentials" \
        "$DEMO_HOMES/$user/.aws is an empty mask"
try_read "read gcloud credentials via the granted parent" \
        "$DEMO_HOMES/$user/.config/gcloud/application_default_credentials.json" \
        "$DEMO_HOMES/$user/.config/gcloud is an empty mask"
try_read "read /etc/shadow" /etc/shadow "hidden"

# -- write outside the workspace -------------------------------------------------
try_write() {  # what, path
        if (echo pwned >"$2") 2>/tmp/err; then
                succeeded "$1" "wrote $2"
        else
                blocked "$1" "$(why </tmp/err)"
        fi
}
try_write "write /usr/bin/pwned" /usr/bin/pwned
try_write "plant ~/.bashrc in the granted home" "$DEMO_HOMES/$user/.bashrc"

# -- look at and signal the host's processes -------------------------------------
n=0 seen_host=no
for d in /proc/[0-9]*; do
        n=$((n + 1))
        case $(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) in
        *brig-demo-listener*) seen_host=yes ;;
        esac
done
if [ "$seen_host" = yes ]; then
        succeeded "list host processes" "the demo's host process is visible"
else
        blocked "list host processes" "sees $n processes, all in the sandbox"
fi
if kill -TERM "$DEMO_HOST_PID" 2>/tmp/err; then
        succeeded "signal host pid $DEMO_HOST_PID" "kill succeeded"
else
        blocked "signal host pid $DEMO_HOST_PID" "$(why </tmp/err)"
fi

# -- become root --------------------------------------------------------------
if [ "$(su root -c 'id -u' </dev/null 2>/dev/null)" = 0 ]; then
        succeeded "su root (setuid binary)" "got uid 0"
else
        blocked "su root (setuid binary)" "setuid is inert (no_new_privs); uid stays $(id -u)"
fi
if unshare -r id -u >/dev/null 2>/tmp/err; then
        succeeded "unshare -r (new user namespace as root)" "created one"
else
        blocked "unshare -r (new user namespace as root)" "$(why </tmp/err), i.e. the namespace limit is 0 inside"
fi
if mount -t tmpfs none /tmp 2>/dev/null; then
        succeeded "mount a filesystem" "mounted"
else
        caps=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
        blocked "mount a filesystem" "no capabilities: CapEff=$caps"
fi

# -- reach the network --------------------------------------------------------
ifaces=$(sed -n 's/^ *\([^ :]*\):.*/\1/p' /proc/net/dev | tr '\n' ' ')
if [ "$ifaces" = "lo " ]; then
        blocked "find a network interface" "only lo"
else
        succeeded "find a network interface" "sees: $ifaces"
fi
if command -v python3 >/dev/null; then
        connect="python3 -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])), 2)' $DEMO_PORT"
elif command -v bash >/dev/null; then
        connect="bash -c 'exec 3<>/dev/tcp/127.0.0.1/$DEMO_PORT'"
else
        connect=
fi
if [ -z "$connect" ]; then
        echo "ATTEMPT connect to the host's 127.0.0.1:$DEMO_PORT: skipped (no python3 or bash)"
elif eval "$connect" 2>/tmp/err; then
        succeeded "connect to the host's 127.0.0.1:$DEMO_PORT" "connected"
else
        blocked "connect to the host's 127.0.0.1:$DEMO_PORT" "$(tail -n 1 /tmp/err | why), own loopback"
fi

# -- the real work ---------------------------------------------------------------
work=failed
if make -s -C project test >/tmp/make.log 2>&1; then
        work=ok
        echo "WORK build and test ./project: OK ($(cat project/out/test-result.txt))"
else
        echo "WORK build and test ./project: FAILED"
        sed 's/^/    /' /tmp/make.log
fi

echo "DONE $attempts attempts, $succeeded succeeded; work $work"
[ "$succeeded" -eq 0 ] && [ "$work" = ok ]
