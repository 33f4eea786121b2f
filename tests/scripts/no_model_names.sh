#!/usr/bin/env bash
# The framework, the zoo tool on it (apps/zoo), the kernels and the shared layers know no particular
# model, and the qwen3 plugin knows nothing of Higgs (it must not be shaped around the plugin that
# reuses it). Any mention, comments included, fails: a comment naming a model is how model-specific
# code starts.
# Usage: no_model_names.sh SOURCE_DIR [BUILD_DIR]
set -u
SRC=$(cd "$1" && pwd)
status=0

# check WORDS DIR...: case-insensitive extended regex over every file under the dirs.
check() {
  local words=$1
  shift
  local dir hits
  for dir in "$@"; do
    [[ -d $SRC/$dir ]] || { echo "FAIL: $dir does not exist"; status=1; continue; }
    # One exception, by exact token: `zoo tts --ref-audio` (issue 27 names the option so; the
    # framework otherwise says "sound"). Lines whose only hits are that option still pass.
    hits=$(grep -rniE -- "$words" "$SRC/$dir" | sed -E 's/ref[-_]audio//g' | grep -iE -- "$words")
    if [[ -n $hits ]]; then
      echo "FAIL: $dir mentions /$words/:"
      echo "${hits//$SRC\//}"
      status=1
    fi
  done
}

# "llama-cli"/"llama-bench" name another tool's spellings of flags; "llama3" is a RoPE scaling type.
check 'qwen|higgs|audio|mistral|gemma|olmo|phi-?3|llama([^3-]|$)' framework apps kernels
# The decoder runtime is configured by plugins.
check 'qwen|higgs|audio|mistral|gemma|olmo|phi-?3|llama([^3]|$)' layers
check 'higgs|audio' plugins/qwen3

# The check itself must be able to fail: the plugins that are allowed to use the words do.
grep -rqiE 'higgs' "$SRC/plugins/higgs_audio" || { echo "FAIL: the pattern finds nothing where it must"; status=1; }
exit $status
