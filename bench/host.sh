# bench/host.sh — sourced by the benchmarks: leave the host as found.
# firejail, run as root, mounts things under /run/firejail in the host's
# mount namespace and leaves them there (its normal behaviour); a benchmark
# that ran it unmounts, at its end, those that appeared while it ran —
# deepest first, and only once no firejail process is left.
firejail_mounts() { findmnt -rn -o TARGET 2>/dev/null | grep '^/run/firejail' | sort || true; }
_firejail_mounts_before=$(firejail_mounts)
host_restore() {
        [ "$(id -u)" = 0 ] || return 0
        pgrep -x firejail >/dev/null 2>&1 && return 0
        comm -13 <(echo "$_firejail_mounts_before") <(firejail_mounts) | sort -r | while read -r m; do
                if [ -n "$m" ]; then umount "$m" 2>/dev/null || true; fi
        done
}
