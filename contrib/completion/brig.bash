# bash completion for brig: commands, each command's options, the values
# of options that take a fixed set, files where an option takes a path, and
# sandbox names (from `brig ls --json`). Installed as
# share/bash-completion/completions/brig; needs no helper of the
# bash-completion package. tests/integration/test_install.py runs it and
# compares what it offers with each command's --help.

_brig_commands="run create exec cp files ls stop start rm pause resume diff commit reset
        snapshot restore fork pool mcp policy doctor log replay serve oci version help"

# brig run --help; create, pool and mcp take these too, less the run-only ones.
_brig_run_opts="--profile --policy --workspace --read-only-workspace --cwd --shm-size
        --ro-bind --bind --tmpfs --tmp-size --home-size --sys --deny --unsafe-allow-secret
        --copy-in --copy-in-secret --ssh-agent --git-identity --carry-config
        --env --keep-env --pass-fd --hostname --clock-start --tty --no-tty --terminal-passthrough
        --net --allow-host --allow-private-host --deny-host --allow-cidr --resolve
        --allow-unix --upstream-proxy
        --secret --secret-host --secret-header --upstream-ca --http-rule
        --memory --pids --cpus --io-weight --timeout --kill-after --cpu-time --nofile
        --nproc --fsize --stack --require-limits
        --seccomp-allow --seccomp-deny --seccomp-rule --wall --allow-degraded
        --json-report --json-report-fd --audit --audit-fd --audit-no-exec --changes-max --manifest --timings --quiet --pooled --pool"
_brig_run_only="--pass-fd --json-report --json-report-fd --audit --audit-fd --manifest --timings --quiet --pooled --pool"
_brig_exec_opts="--env --cwd --tty --no-tty --terminal-passthrough --timeout --json-report --detach --quiet --timings"

# The options whose value is a host path.
_brig_path_opts="--policy --workspace --ro-bind --bind --deny --unsafe-allow-secret
        --copy-in --copy-in-secret --allow-unix --upstream-ca --json-report --audit --manifest"

# Every option that takes a value, so its value is not taken for a name.
_brig_value_opts="--profile --policy --workspace --cwd --shm-size --ro-bind --bind --tmpfs
        --tmp-size --home-size --deny --unsafe-allow-secret --copy-in --copy-in-secret
        --carry-config --env --keep-env --pass-fd --hostname --clock-start --net --allow-host
        --allow-private-host --deny-host --allow-cidr --resolve --allow-unix --upstream-proxy
        --secret --secret-host --secret-header --upstream-ca --http-rule
        --memory --pids --cpus --io-weight --timeout --kill-after --cpu-time --nofile --nproc
        --fsize --stack --seccomp-allow --seccomp-deny --seccomp-rule --wall --allow-degraded
        --json-report --json-report-fd --audit --audit-fd --changes-max --workspace-mode --size --exclude --max-size --mode
        --only --sha256 --manifest"

_brig_has()
{
        local w
        for w in $2; do
                [[ $w == "$1" ]] && return 0
        done
        return 1
}

_brig_names()
{
        # One JSON array on one line; a sandbox name is [A-Za-z0-9_.-].
        "$1" ls --json 2>/dev/null | grep -o '"name": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'
}

_brig()
{
        local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
        local cmd=${COMP_WORDS[1]} brig=${COMP_WORDS[0]}
        COMPREPLY=()
        if (( COMP_CWORD == 1 )); then
                COMPREPLY=($(compgen -W "$_brig_commands --help --version" -- "$cur"))
                return
        fi

        # After --: the command inside and its arguments.
        local i
        for (( i = 2; i < COMP_CWORD; i++ )); do
                if [[ ${COMP_WORDS[i]} == -- ]]; then
                        if (( i == COMP_CWORD - 1 )); then
                                COMPREPLY=($(compgen -c -- "$cur"))
                        else
                                COMPREPLY=($(compgen -f -- "$cur"))
                        fi
                        return
                fi
        done

        case $prev in
        --profile) COMPREPLY=($(compgen -W "default strict build browser" -- "$cur")); return ;;
        --net) COMPREPLY=($(compgen -W "none proxy filtered host" -- "$cur")); return ;;
        --wall) COMPREPLY=($(compgen -W "namespaces gvisor" -- "$cur")); return ;;
        --workspace-mode) COMPREPLY=($(compgen -W "bind overlay" -- "$cur")); return ;;
        --carry-config) COMPREPLY=($(compgen -W "npm pip" -- "$cur")); return ;;
        --allow-degraded) COMPREPLY=($(compgen -W "landlock seccomp" -- "$cur")); return ;;
        --workspace|--cwd) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        esac
        if _brig_has "$prev" "$_brig_path_opts"; then
                COMPREPLY=($(compgen -f -- "$cur"))
                return
        fi
        if _brig_has "$prev" "$_brig_value_opts"; then
                return
        fi

        local opts="" names=0
        case $cmd in
        run) opts=$_brig_run_opts ;;
        create)
                for i in $_brig_run_opts; do
                        _brig_has "$i" "$_brig_run_only" || opts+=" $i"
                done
                opts+=" --workspace-mode" ;;
        exec) opts=$_brig_exec_opts; names=1 ;;
        cp) opts="--max-size --mode --timeout" ;;
        files)
                opts="--max-size --mode --timeout"; names=1
                # brig files NAME OP: the operation
                if [[ $cur != -* && ${COMP_WORDS[2]} != -* ]] && (( COMP_CWORD == 3 )); then
                        COMPREPLY=($(compgen -W "list stat mkdir rm tar-out tar-in" -- "$cur"))
                        return
                fi ;;
        ls|doctor) opts="--json" ;;
        log)
                if (( COMP_CWORD == 2 )) && [[ $cur != -* ]]; then
                        COMPREPLY=($(compgen -W "verify" -- "$cur") $(compgen -f -- "$cur"))
                        return
                fi
                # --sha256 is verify's; the rest the timeline's (brig log --help lists both)
                opts="--follow --only --denied --json --summary --no-color --sha256"
                if [[ $prev == --only ]]; then
                        COMPREPLY=($(compgen -W "start exec net syscall files limit approval end" -- "$cur"))
                        return
                fi
                [[ $cur != -* && $prev != --sha256 ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
        replay)
                opts="--workspace --allow-changed-workspace --json"
                [[ $cur != -* ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
        serve) opts="--socket --socket-mode --state --listen --token-file --policy --max-sandboxes --max-execs --max-body
                --max-output --idle-timeout --client-timeout --remove-on-exit" ;;
        stop|start|rm|pause|resume) names=-1 ;;
        oci) opts="--root --log --log-format --systemd-cgroup --debug --version --bundle --pid-file
                --console-socket --detach --no-pivot --no-new-keyring --preserve-fds --force --all --format
                --process --tty --cwd --resources --memory --pids-limit --cpu-quota --cpu-period" ;;
        diff|commit) opts="--exclude --json"; names=1 ;;
        reset|restore|fork) names=1 ;;
        snapshot) opts="--list --rm"; names=1 ;;
        pool)
                for i in $_brig_run_opts; do
                        _brig_has "$i" "$_brig_run_only" || opts+=" $i"
                done
                opts+=" --size --stop --name --list --json --all" ;;
        mcp)
                for i in $_brig_run_opts; do
                        _brig_has "$i" "$_brig_run_only" || opts+=" $i"
                done
                opts+=" --overlay --keep" ;;
        policy)
                if (( COMP_CWORD == 2 )); then
                        COMPREPLY=($(compgen -W "show check explain --help" -- "$cur"))
                        return
                fi
                case ${COMP_WORDS[2]} in
                show|explain)
                        for i in $_brig_run_opts; do
                                _brig_has "$i" "$_brig_run_only" || opts+=" $i"
                        done ;;
                check) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                esac ;;
        *) return ;;
        esac

        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
                return
        fi
        # The sandbox name: the first word that is not an option (or every
        # word, for the commands that take NAME...).
        local words=0
        for (( i = 2; i < COMP_CWORD; i++ )); do
                [[ ${COMP_WORDS[i]} == -* ]] && continue
                _brig_has "${COMP_WORDS[i-1]}" "$_brig_value_opts" && continue
                words=$((words + 1))
        done
        if (( names == -1 || (names == 1 && words == 0) )); then
                COMPREPLY=($(compgen -W "$(_brig_names "$brig")" -- "$cur"))
        elif [[ $cmd == diff || $cmd == commit ]]; then
                COMPREPLY=($(compgen -f -- "$cur"))
        fi
}

complete -F _brig brig
