#!/usr/bin/env bash
# Every file option of every command, enumerated from the CLI itself (`zoo --list-file-options`,
# apps/zoo/file_options.hpp), against hostile files. An option that takes text and is not
# classified fails here, so a new file option cannot escape these cases:
#   input:   a FIFO (must not block), a directory, /dev/zero, a symlink loop -> exit 2, one line
#            naming the file;
#   output:  the same file as an input, a hard link and a symlink to an input, the same file as
#            another output -> exit 2, one line, the input unchanged; and, through a working run
#            of the command, a FIFO target (written into, still a FIFO), a read-only directory and
#            a full file system (exit 2, one line, an older file there intact, no temporary left);
#   output-dir: a FIFO, a regular file, a symlink loop -> exit 2;
#   search-path: the plugin registry's rules (exit 0 or 2), never a hang.
# The read-only and full cases need `mount -t tmpfs` (root, as in CI: mode bits do not bind
# root); without it they are reported as skipped and the script exits 77 when nothing failed.
# Usage: cli_file_options.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-file-options "$@"
skipped=()

"$ZOO" --list-file-options >"$TMP/list" 2>"$TMP/err" || fail "zoo --list-file-options: rc $? $(cat "$TMP/err")"
while read -r cmd opt cls _; do
  [[ $cls == UNCLASSIFIED ]] && fail "$cmd $opt is not classified (tag it in apps/zoo/file_options.hpp's terms)"
done <"$TMP/list"
# The listing must be complete, not merely free of UNCLASSIFIED: a few known options by class.
for want in "tts --out output" "tts --codes input" "tts --codes-out output" "tts --ref-codes input" \
  "generate --prompt-file input" "tokenize --input input" "trace --out output" "synth --out output-dir" \
  "compare golden input" "plugins --plugin-dir search-path" "generate --temperature not-a-file" \
  "template --messages input" "template --tools input" "generate --messages input"; do
  grep -q "^$want\b" "$TMP/list" || fail "--list-file-options lacks '$want'"
done

# Hostile things.
mkfifo "$TMP/fifo"
mkdir "$TMP/dir"
ln -s loop-b "$TMP/loop-a"
ln -s loop-a "$TMP/loop-b"

# args CMD UNDER VALUE [EXTRA_OPT EXTRA_VALUE]...: the argv (into ARGS) of CMD with option UNDER
# set to VALUE, every required option and every option UNDER needs given a harmless value (a
# distinct regular file per input, a fresh name per output, "x" otherwise), and the extras.
declare -A EXTRA
args() {
  local cmd=$1 under=$2 value=$3
  shift 3
  EXTRA=()
  while (($#)); do
    EXTRA[$1]=$2
    shift 2
  done
  local needs=" " c o cls rest given
  for given in "$under" "${!EXTRA[@]}"; do
    for rest in $(grep "^$cmd $given " "$TMP/list"); do [[ $rest == needs=* ]] && needs+="${rest#needs=} "; done
  done
  # One level more (--ref-text needs --ref-codes, which needs --text).
  for rest in $needs; do
    local r
    for r in $(grep "^$cmd $rest " "$TMP/list"); do [[ $r == needs=* ]] && needs+="${r#needs=} "; done
  done
  ARGS=("$cmd")
  while read -r c o cls rest; do
    [[ $c == "$cmd" ]] || continue
    local v=
    if [[ $o == "$under" ]]; then
      v=$value
    elif [[ -n ${EXTRA[$o]+x} ]]; then
      v=${EXTRA[$o]}
    elif [[ " $rest " == *" required "* || $needs == *" $o "* ]]; then
      case $cls in
        input) v=$TMP/in-$cmd-${o#--}; [[ -e $v ]] || echo "input of $cmd $o" >"$v" ;;
        output) v=$TMP/out-$cmd-${o#--} ;;
        output-dir) v=$TMP/outdir-$cmd-${o#--} ;;
        search-path) v=$TMP/dir ;;
        *) v=x ;;
      esac
    else
      continue
    fi
    if [[ " $rest " == *" positional "* ]]; then ARGS+=("$v"); else ARGS+=("$o" "$v"); fi
  done <"$TMP/list"
}

# expect2 DESCRIPTION PATTERN: the last `go` exited 2 with one line on stderr holding PATTERN.
go() {
  cases=$((cases + 1))
  timeout -k 5 30 "$ZOO" "${ARGS[@]}" >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?
}
expect2() {
  local what=$1 pattern=$2
  if ((RC == 124 || RC == 137)); then
    fail "$what: hung (killed after 30 s): zoo ${ARGS[*]}"
  elif ((RC != 2)); then
    fail "$what: exit $RC, expected 2: zoo ${ARGS[*]}: $(head -c 500 "$TMP/err")"
  else
    local lines
    lines=$(grep -cv '^Run with --help' "$TMP/err")
    ((lines == 1)) || fail "$what: $lines lines on stderr: $(head -c 1000 "$TMP/err")"
    grep -qF -- "$pattern" "$TMP/err" || fail "$what: stderr lacks '$pattern': $(head -c 500 "$TMP/err")"
  fi
}

n_inputs=0 n_outputs=0
while read -r cmd opt cls rest; do
  case $cls in
    input)
      n_inputs=$((n_inputs + 1))
      for bad in fifo dir /dev/zero loop-a; do
        path=$bad
        [[ $bad == /* ]] || path=$TMP/$bad
        args "$cmd" "$opt" "$path"
        go
        # A directory is what a dir-ok option may take (a model directory): the command then says
        # what it lacks, in its own words.
        if [[ $bad == dir && " $rest " == *" dir-ok "* ]]; then
          expect2 "$cmd $opt $bad" ""
          continue
        fi
        expect2 "$cmd $opt $bad" "$path"
        [[ " $rest " == *" positional "* ]] || grep -qF -- "$opt" "$TMP/err" || fail "$cmd $opt $bad: the error does not name $opt: $(cat "$TMP/err")"
      done
      [[ -p $TMP/fifo ]] || fail "$cmd $opt: the FIFO was replaced"
      ;;
    output)
      n_outputs=$((n_outputs + 1))
      # Onto each input of the command: the required ones (always given) and every other.
      while read -r c2 in_opt in_cls in_rest; do
        [[ $c2 == "$cmd" && $in_cls == input ]] || continue
        src=$TMP/victim-$cmd-${in_opt#--}
        echo "precious input of $cmd $in_opt" >"$src"
        cp "$src" "$src.saved"
        ln -f "$src" "$src.hard"
        ln -sf "$src" "$src.sym"
        for target in "$src" "$src.hard" "$src.sym"; do
          args "$cmd" "$opt" "$target" "$in_opt" "$src"
          go
          # Options that exclude each other (tts --codes-out needs --text, which excludes --codes)
          # are a usage error: exit 2 too, and the input stays.
          if grep -q "excludes" "$TMP/err"; then expect2 "$cmd $opt onto $in_opt" "excludes"; else
            expect2 "$cmd $opt onto $in_opt (${target##*.})" "is the same file as the"
            grep -qF "($in_opt)" "$TMP/err" || fail "$cmd $opt onto $in_opt: the error does not name $in_opt: $(cat "$TMP/err")"
          fi
          cmp -s "$src" "$src.saved" || fail "$cmd $opt onto $in_opt (${target##*.}): the input was modified"
        done
      done <"$TMP/list"
      # Onto another output of the command.
      while read -r c2 o2 cls2 _; do
        [[ $c2 == "$cmd" && $cls2 == output && $o2 != "$opt" ]] || continue
        args "$cmd" "$opt" "$TMP/both-$cmd" "$o2" "$TMP/both-$cmd"
        go
        expect2 "$cmd $opt and $o2 the same file" "one file cannot hold both"
      done <"$TMP/list"
      ;;
    output-dir)
      for bad in fifo in-file loop-a; do
        echo x >"$TMP/in-file"
        args "$cmd" "$opt" "$TMP/$bad"
        go
        expect2 "$cmd $opt $bad" "$TMP/$bad"
      done
      ;;
    search-path)
      for bad in fifo dir /dev/zero loop-a; do
        path=$bad
        [[ $bad == /* ]] || path=$TMP/$bad
        args "$cmd" "$opt" "$path"
        go
        ((RC == 0 || RC == 2)) || fail "$cmd $opt $bad: exit $RC (expected 0 or 2): $(head -c 500 "$TMP/err")"
      done
      ;;
  esac
done <"$TMP/list"
((n_inputs >= 15 && n_outputs >= 5)) || fail "only $n_inputs input and $n_outputs output options enumerated"

# Working runs of every output option, for the cases that need the command to get as far as
# writing. Keyed by "COMMAND OPTION"; TARGET stands for the output. An output option without an
# entry fails: give it one when adding it.
QCFG=$SRC/configs/qwen3-tiny.yaml
HCFG=$SRC/configs/higgs-tiny-codec.yaml
declare -A WORKS=(
  ["trace --out"]="trace -q $QCFG --request $FIX/qwen3-tiny/request.json --out TARGET"
  ["validate --out"]="validate -q $QCFG --out TARGET"
  ["generate --out"]="generate -q $QCFG --request $FIX/qwen3-tiny/request.json --max-new-tokens 2 --out TARGET"
  ["tts --out"]="tts -q $HCFG --codes $FIX/higgs-tiny-codec/codes.json --out TARGET"
  ["tts --codes-out"]="tts -q $HCFG --text Hello --seed 1 --max-frames 8 --codes-out TARGET"
  ["synth --out"]="synth -q --config $FIX/qwen3-tiny/config.json --out TARGET"
)
works() {  # works KEY TARGET: runs the working invocation with TARGET, leaves RC
  local cmdline=${WORKS[$1]}
  ARGS=()
  for w in $cmdline; do ARGS+=("${w/TARGET/$2}"); done
  go
}

can_mount=0
mkdir -p "$TMP/mnt-probe"
if mount -t tmpfs -o size=64k tmpfs "$TMP/mnt-probe" 2>/dev/null; then
  umount "$TMP/mnt-probe"
  can_mount=1
fi
cleanup_mounts() {
  for m in "$TMP"/ro "$TMP"/full; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  rm -rf "$TMP"
}
trap cleanup_mounts EXIT

while read -r cmd opt cls _; do
  [[ $cls == output || $cls == output-dir ]] || continue
  key="$cmd $opt"
  if [[ -z ${WORKS[$key]+x} ]]; then
    fail "$key: no working invocation in cli_file_options.sh's WORKS table"
    continue
  fi
  # A plain run works (the table itself is right).
  rm -rf "$TMP/plain-out"
  works "$key" "$TMP/plain-out"
  ((RC == 0)) || fail "$key: the working invocation exits $RC: $(head -c 500 "$TMP/err")"
  if [[ $cls == output ]]; then
    rm -f "$TMP/fifo-out"
    mkfifo "$TMP/fifo-out"
    timeout 60 cat "$TMP/fifo-out" >"$TMP/fifo-got" &
    reader=$!
    works "$key" "$TMP/fifo-out"
    wait "$reader"
    ((RC == 0)) || fail "$key onto a FIFO: exit $RC: $(head -c 500 "$TMP/err")"
    [[ -p $TMP/fifo-out ]] || fail "$key onto a FIFO: the FIFO was replaced"
    [[ -s $TMP/fifo-got ]] || fail "$key onto a FIFO: nothing was written into it"
  fi
  if ((can_mount)); then
    mkdir -p "$TMP/ro" "$TMP/full"
    mount -t tmpfs -o ro,size=64k tmpfs "$TMP/ro"
    works "$key" "$TMP/ro/x"
    expect2 "$key in a read-only directory" "$TMP/ro/x"
    umount "$TMP/ro"
    mount -t tmpfs -o size=64k tmpfs "$TMP/full"
    target=$TMP/full/x
    # An older output there first, then the rest of the space taken.
    [[ $cls == output ]] && echo "older output" >"$target"
    head -c 1M /dev/zero >"$TMP/full/fill" 2>/dev/null
    before=$(cat "$target" 2>/dev/null)
    works "$key" "$target"
    expect2 "$key on a full file system" "$target"
    [[ $cls == output-dir || "$(cat "$target" 2>/dev/null)" == "$before" ]] || fail "$key on a full file system: the older file was changed"
    ls -A "$TMP/full" | grep -q 'zoo-tmp' && fail "$key on a full file system: temporary file left: $(ls -A "$TMP/full")"
    umount "$TMP/full"
  else
    skipped+=("$key: read-only directory and full file system (no tmpfs mount here)")
  fi
done <"$TMP/list"

echo "$cases cases, $failures failures, ${#skipped[@]} skipped"
for s in "${skipped[@]}"; do echo "SKIPPED: $s"; done
((failures == 0)) || exit 1
((${#skipped[@]} == 0)) || exit 77
exit 0
