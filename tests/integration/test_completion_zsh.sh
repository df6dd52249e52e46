#!/usr/bin/env bash
# `etcdbrctl completion zsh` in a real interactive zsh (on a pseudo-terminal, zsh/zpty): the
# script parses (zsh -n), registers _etcdbrctl after compinit, and <TAB> completes commands,
# flags and flag values as a user typing would see. etcdbrctl is a shell function there that
# records the command line it is called with, so each completed line is read back exactly.
source "$(dirname "$0")/lib.sh"
command -v zsh >/dev/null || skip_test "zsh is not installed (scripts/install-deps.sh installs it)"
make_workdir
"$ETCDBR_BIN" completion zsh >"$WORK/_etcdbrctl"
zsh -n "$WORK/_etcdbrctl" || fail "zsh -n: the script does not parse"
out=$(zsh -f -c "autoload -U compinit && compinit -u -D -d '$WORK/zcompdump'; source '$WORK/_etcdbrctl'; print -r -- \$_comps[etcdbrctl]" 2>&1)
[ "$out" = _etcdbrctl ] || fail "after compinit, etcdbrctl completes with '$out'"
# autoloaded from $fpath as compinit finds it (#compdef)
out=$(zsh -f -c "fpath=('$WORK' \$fpath); autoload -U compinit && compinit -u -D -d '$WORK/zcompdump2'; print -r -- \$_comps[etcdbrctl]" 2>&1)
[ "$out" = _etcdbrctl ] || fail "from \$fpath, etcdbrctl completes with '$out'"

# typed line (ending in <TAB>) -> the line etcdbrctl runs with
cases=(
    'etcdbrctl sna'                            'snapshot'
    'etcdbrctl snapshot --storage-prov'        'snapshot --storage-provider'
    'etcdbrctl snapshot --storage-provider=OS' 'snapshot --storage-provider=OSS'
    'etcdbrctl restore --storage-provider Sw'  'restore --storage-provider Swift'
    'etcdbrctl snapshot --compression-policy zs' 'snapshot --compression-policy zstd'
    'etcdbrctl list -o js'                     'list -o json'
    'etcdbrctl help verif'                     'help verify'
    'etcdbrctl completion fi'                  'completion fish'
    'etcdbrctl run --data-d'                   'run --data-dir'
)
cat >"$WORK/drive.zsh" <<'ZSH'
zmodload zsh/zpty || exit 3
out=$1 script=$2
shift 2
: >$out
zpty z 'zsh -f -i'
zpty -w z "PS1='%% '; autoload -U compinit; compinit -u -D -d ${out:h}/zcompdump3; source $script; etcdbrctl() { print -r -- \"\$*\" >> $out; }; etcdbrctl ready"
# waits (at most 20 s) until $out has $1 lines, reading the terminal meanwhile
wait_lines() {
    local i chunk
    for i in {1..200}; do
        while zpty -r -t z chunk; do :; done
        (( $(wc -l <$out) >= $1 )) && return 0
        sleep 0.1
    done
    return 1
}
wait_lines 1 || exit 4
n=1
for typed in "$@"; do
    zpty -w -n z "$typed"$'\t\r'
    (( n++ ))
    wait_lines $n || { print -u2 "no command line after: $typed"; exit 5; }
done
zpty -d z
ZSH
typed=()
for ((i = 0; i < ${#cases[@]}; i += 2)); do typed+=("${cases[i]}"); done
zsh -f "$WORK/drive.zsh" "$WORK/lines" "$WORK/_etcdbrctl" "${typed[@]}" || fail "driving zsh failed ($?)"
mapfile -t got <"$WORK/lines"
[ "${got[0]}" = ready ] || fail "zsh did not start: ${got[*]}"
for ((i = 0; i < ${#cases[@]}; i += 2)); do
    line=${got[i / 2 + 1]:-}
    [ "$line" = "${cases[i + 1]}" ] || fail "zsh: '${cases[i]}<TAB>' ran 'etcdbrctl $line', want 'etcdbrctl ${cases[i + 1]}'"
done
echo "zsh completion: ok"
