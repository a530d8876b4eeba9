// Seeded random text for the tokenizer tests and benchmarks (tiktoken_oracle.mjs,
// hf_tokenizers_oracle.mjs): the same strings for a seed on every machine.

// mulberry32: a small seeded generator, so the strings are the same wherever the test runs.
export function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Drawing from a seeded generator: below(n) in [0, n), from(first, last) a code point's
// character, pick(items) one of them.
export function randomTools(seed) {
  const random = generator(seed);
  const below = (n) => Math.floor(random() * n);
  const from = (first, last) => String.fromCodePoint(first + below(last - first + 1));
  const pick = (items) => items[below(items.length)];
  return { below, from, pick };
}

// Printable text of the kinds GPT-2's regex tells apart: ASCII words, digits and punctuation,
// contractions, Latin-1, CJK, emoji, combining marks, and runs of ASCII and Unicode whitespace;
// as [weight, make] pairs.
export function gpt2Kinds({ below, from, pick }) {
  return [
    [6, () => from(0x61, 0x7a)],  // a-z
    [2, () => from(0x41, 0x5a)],
    [2, () => from(0x30, 0x39)],
    [3, () => from(0x21, 0x2f)],  // punctuation
    [2, () => pick(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'"])],
    [3, () => from(0xa0, 0xff)],  // Latin-1, from the no-break space on
    [2, () => from(0x4e00, 0x9fa5)],  // CJK ideographs
    [2, () => from(0x1f300, 0x1f64f)],  // emoji
    [1, () => from(0x300, 0x36f)],  // combining marks
    [5, () => pick([" ", " ", " ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2003"]).repeat(1 + below(4))],
  ];
}

// COUNT strings of up to maxPieces pieces, each of a kind of kindsOf(tools) drawn by its weight.
export function randomStrings(count, seed, kindsOf = gpt2Kinds, maxPieces = 40) {
  const tools = randomTools(seed);
  const kinds = kindsOf(tools);
  const total = kinds.reduce((sum, [weight]) => sum + weight, 0);
  const piece = () => {
    let roll = tools.below(total);
    for (const [weight, make] of kinds) {
      if (roll < weight) return make();
      roll -= weight;
    }
  };
  const strings = [];
  for (let i = 0; i < count; i++) {
    let text = "";
    for (let length = tools.below(maxPieces); length > 0; length--) text += piece();
    strings.push(text);
  }
  return strings;
}
