// The oracles of tests/integration/hf_tokenizers.sh and the peers of scripts/bench_tokenizer.sh,
// from the npm cache tokenizer_npm.sh installs them into (TOKENIZER_NPM_DIR): for Llama 3's
// byte-level BPE, llama3-tokenizer-js and @huggingface/tokenizers (a JavaScript port of Hugging
// Face's tokenizers) reading the tokenizer.json written here from the first one's data; for
// Llama 2's SentencePiece-style BPE, llama-tokenizer-js and @huggingface/tokenizers the same way.
//   node hf_tokenizers_oracle.mjs tokenizers DIR
//       DIR/llama3.json and DIR/llama2.json, as Hugging Face writes those models' tokenizer.json
//   node hf_tokenizers_oracle.mjs corpus DIR SEED [MEGABYTES]
//       DIR/NNNNN.txt, a document each (valid UTF-8), and DIR.json, their list: the licence texts
//       and generated documents heavy in what tokenizers get wrong, MEGABYTES (2) or more
//   node hf_tokenizers_oracle.mjs special-corpus DIR SEED
//       the same for 300 documents that hold Llama 3's special tokens among their text
//   node hf_tokenizers_oracle.mjs compare llama3|llama2 TOKENIZER.json CORPUS.json TOKENS.bin [SPECIAL.json SPECIAL.bin]
//       each document's ids from both oracles against trainctl's (TOKENS.bin split at the BOS
//       before each document); exit 1 where trainctl differs from both oracles agreeing, and a
//       report of the documents where the oracles disagree (not counted against trainctl). Then
//       the same for SPECIAL.json's documents, tokenized with --special, in the same process
//       (loading llama3-tokenizer-js takes seconds)
//   node hf_tokenizers_oracle.mjs expected-text llama3|llama2 CORPUS.json OUT
//       what `trainctl data decode` must print: each document after its BOS's text
//   node hf_tokenizers_oracle.mjs bench llama3 TOKENIZER.json FILE
//       "NAME SECONDS CPU_SECONDS" for each oracle's encoding of FILE as one document, the
//       encoding alone: its wall time and the CPU time of the process meanwhile
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { generator, randomStrings, randomTools } from "./random_text.mjs";

const npmDir = process.env.TOKENIZER_NPM_DIR;
if (!npmDir) throw new Error("TOKENIZER_NPM_DIR is not set");
// Each package when a command first needs it: loading one takes seconds (their data are baked in).
const load = async (file) => import(pathToFileURL(path.join(npmDir, "node_modules", file)));
const llama3Package = async () => (await load("llama3-tokenizer-js/bundle/llama3-tokenizer-with-baked-data.js")).default;
const llama2Package = async () => (await load("llama-tokenizer-js/llama-tokenizer.js")).default;
const huggingFacePackage = async () => (await load("@huggingface/tokenizers/dist/tokenizers.mjs")).Tokenizer;

const kHeaderInts = 256;
const kBos = { llama3: 128000, llama2: 1 };
const kBosText = { llama3: "<|begin_of_text|>", llama2: "<s>" };
// A regex that matches nothing: llama3-tokenizer-js matches Llama 3's special tokens in the text
// unless given another.
const kNoSpecialTokens = /(?!)/g;

function addedToken(id, content) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

function template(bos, id) {
  return {
    type: "TemplateProcessing",
    single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
    pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
      { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
    special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
  };
}

// The merges in rank order, as [left, right]: the packages key them "left right" by rank.
function mergesOf(tokenizer) {
  return [...tokenizer.merges.entries()].sort((a, b) => a[1] - b[1]).map(([pair]) => pair.split(" "));
}

// Llama 3's tokenizer.json: the first 128000 tokens the model's vocabulary, the 256 special
// tokens after them added tokens; the Split regex, ByteLevel, ignore_merges, a BOS template.
function llama3Json(llama3Js) {
  const vocab = {};
  llama3Js.vocabById.slice(0, 128000).forEach((token, id) => { vocab[token] = id; });
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false };
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: llama3Js.vocabById.slice(128000).map((token, i) => addedToken(128000 + i, token)),
    normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
        behavior: "Isolated", invert: false },
      byteLevel] },
    post_processor: { type: "Sequence", processors: [{ ...byteLevel, trim_offsets: false }, template("<|begin_of_text|>", 128000)] },
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges: mergesOf(llama3Js) },
  };
}

// Llama 2's tokenizer.json as transformers writes it: Prepend and Replace, no pre-tokenizer,
// byte fallback, a BOS template.
function llama2Json(llama2Js) {
  const vocab = {};
  llama2Js.vocabById.forEach((token, id) => { vocab[token] = id; });
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [addedToken(0, "<unk>"), addedToken(1, "<s>"), addedToken(2, "</s>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" },
      { type: "Replace", pattern: { String: " " }, content: "▁" }] },
    pre_tokenizer: null,
    post_processor: template("<s>", 1),
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " },
      { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
    model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: true, byte_fallback: true, vocab, merges: mergesOf(llama2Js) },
  };
}

// Each oracle as a function of one document's text to its ids, without BOS or EOS.
async function oracles(family, tokenizerFile, special) {
  const json = JSON.parse(fs.readFileSync(tokenizerFile, "utf8"));
  // Without --special, no added token is matched: @huggingface/tokenizers matches every one it has.
  if (!special) json.added_tokens = [];
  const hf = new (await huggingFacePackage())(json, {});
  const huggingFace = ["@huggingface/tokenizers", (text) => hf.encode(text, { add_special_tokens: false }).ids];
  if (family === "llama3") {
    const llama3Js = await llama3Package();
    const options = special ? { bos: false, eos: false } : { bos: false, eos: false, specialTokenRegex: kNoSpecialTokens };
    return [["llama3-tokenizer-js", (text) => llama3Js.encode(text, options)], huggingFace];
  }
  if (special) throw new Error("llama-tokenizer-js matches no special tokens");
  const llama2Js = await llama2Package();
  return [["llama-tokenizer-js", (text) => llama2Js.encode(text, false, true)], huggingFace];
}

// Documents heavy in what tokenizers get wrong: runs of spaces and newlines, digits in groups
// of 1 to 7, contractions in both cases, CJK, emoji and other 4-byte characters, combining
// marks, U+FFFD where bytes that are not UTF-8 were, lone surrogates escaped, special-token
// look-alikes and Llama 2's byte-token spellings; some with whitespace the regex engines read
// differently (U+0085, U+FEFF), where the oracles may disagree.
function corpusKinds({ below, from, pick }) {
  const word = () => Array.from({ length: 1 + below(9) }, () => from(0x61, 0x7a)).join("");
  const cased = (text) => pick([text, text.toUpperCase(), text[0].toUpperCase() + text.slice(1)]);
  return [
    [12, () => " " + cased(word())],
    [4, () => cased(word())],
    [3, () => " ".repeat(1 + below(12))],
    [3, () => pick(["\n", "\r\n", "\n\n", "\n\n\n\n", " \n", "\n ", "\t", " \t\n", ".\n\n"]).repeat(1 + below(3))],
    [3, () => pick(["", " "]) + Array.from({ length: 1 + below(7) }, () => from(0x30, 0x39)).join("")],
    [3, () => pick(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'"])],
    [2, () => pick([" don't", " DON'T", " we'll", " WE'LL", " it's", " IT'S", " o'clock"])],
    [3, () => from(0x21, 0x2f) + pick(["", from(0x3a, 0x40), from(0x5b, 0x60)])],
    [2, () => from(0xc0, 0xff)],
    [3, () => Array.from({ length: 1 + below(6) }, () => from(0x4e00, 0x9fa5)).join("")],
    [1, () => from(0x3041, 0x3093) + from(0xac00, 0xd7a3)],
    [2, () => from(0x1f300, 0x1f64f)],
    [1, () => pick([from(0x1d400, 0x1d6a3), from(0x20000, 0x2a6d6), "👨‍👩‍👧", "🇫🇷"])],
    [2, () => from(0x61, 0x7a) + from(0x300, 0x36f) + pick(["", from(0x300, 0x36f)])],
    [1, () => "\ufffd".repeat(1 + below(3))],
    [1, () => pick(["\\ud800", "\\uDFFF", "\\ud83d\\ude00", "\\uD834"])],
    [1, () => pick(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|reserved_special_token_5|>", "<s>", "</s>",
      "<unk>", "<|endoftext|>", "<|begin_of_tex|>", "< |eot_id|>", "<|eot_id|", "<0x0A>", "<0xFF>", "▁", "▁▁"])],
    [2, () => pick(["\u00a0", "\u2003", "\u3000", "\u2028", " \u00a0 "])],
  ];
}

async function writeCorpus(directory, seed, special, megabytes = 2) {
  fs.mkdirSync(directory, { recursive: true });
  const documents = [];
  if (special) {
    // Llama 3's special tokens among text, where --special matches them; not the BOS, which
    // tells the documents apart in trainctl's tokens.
    const { below, pick } = randomTools(seed);
    const tokens = (await llama3Package()).vocabById.slice(128001);
    for (const generated of randomStrings(300, seed, corpusKinds, 30)) {
      const text = generated.replaceAll("<|begin_of_text|>", "");
      const at = below(text.length + 1);
      documents.push(text.slice(0, at) + pick(tokens) + text.slice(at) + pick(["", pick(tokens)]));
    }
  } else {
    const licences = "/usr/share/common-licenses";
    for (const name of fs.readdirSync(licences).sort()) {
      const file = path.join(licences, name);
      if (fs.lstatSync(file).isFile()) documents.push(fs.readFileSync(file, "utf8"));
    }
    let bytes = documents.reduce((sum, text) => sum + Buffer.byteLength(text), 0);
    const random = generator(seed + 1);
    for (let batch = 0; bytes < megabytes * 1e6; batch++) {
      for (const text of randomStrings(100, seed + batch, corpusKinds, 400)) {
        if (text === "") continue;
        // One document in fifty with whitespace the regex engines read differently.
        const exotic = random() < 0.02 ? ["\u0085", "\ufeff", "\u180e", "\u200b"][Math.floor(random() * 4)] : "";
        const document = exotic ? text.replace(" ", exotic) : text;
        documents.push(document);
        bytes += Buffer.byteLength(document);
      }
    }
  }
  documents.forEach((text, i) => fs.writeFileSync(path.join(directory, String(i).padStart(5, "0") + ".txt"), text));
  fs.writeFileSync(directory + ".json", JSON.stringify(documents));
  const written = documents.reduce((sum, text) => sum + Buffer.byteLength(text), 0) / 1e6;
  console.log(`${documents.length} documents, ${written.toFixed(2)} MB`);
}

function readTokens(file) {
  const bytes = fs.readFileSync(file);
  const header = new Int32Array(bytes.buffer, bytes.byteOffset, kHeaderInts);
  const body = bytes.buffer.slice(bytes.byteOffset + 4 * kHeaderInts, bytes.byteOffset + bytes.length);
  return header[0] === 20240801 ? new Uint32Array(body, 0, header[2]) : new Uint16Array(body, 0, header[2]);
}

const same = (a, b) => a.length === b.length && a.every((value, i) => value === b[i]);

// trainctl's tokens, split at the BOS before each document; none appears anywhere else.
function documentsOf(tokens, bos, count) {
  const documents = [];
  for (const token of tokens) {
    if (token === bos) documents.push([]);
    else documents[documents.length - 1].push(token);
  }
  if (documents.length !== count) throw new Error(`${documents.length} BOS tokens in trainctl's tokens, not ${count}`);
  return documents;
}

// Whether trainctl's ids equal the oracles' for every document where the two agree; the
// differences and disagreements printed.
async function compare(family, tokenizerFile, corpusFile, tokensFile, special) {
  const texts = JSON.parse(fs.readFileSync(corpusFile, "utf8"));
  const [[nameA, encodeA], [nameB, encodeB]] = await oracles(family, tokenizerFile, special);
  const written = documentsOf(readTokens(tokensFile), kBos[family], texts.length);
  let agreed = 0, wrong = 0;
  const disagreements = [];
  texts.forEach((text, i) => {
    const a = encodeA(text), b = encodeB(text), ours = written[i];
    if (!same(a, b)) {
      const matches = same(ours, a) ? nameA : same(ours, b) ? nameB : "neither";
      disagreements.push(`document ${i} (${JSON.stringify(text.slice(0, 60))}...): trainctl matches ${matches}`);
      return;
    }
    agreed++;
    if (same(ours, a)) return;
    if (wrong++ < 5) {
      let at = 0;
      while (at < a.length && a[at] === ours[at]) at++;
      console.error(`document ${i}: token ${at} differs: ${nameA} and ${nameB} ${JSON.stringify(a.slice(at, at + 8))}, ` +
        `trainctl ${JSON.stringify(Array.from(ours.slice(at, at + 8)))}; text ${JSON.stringify(text.slice(0, 120))}`);
    }
  });
  console.log(`${family}${special ? " --special" : ""}: ${texts.length} documents; ${agreed} where ${nameA} and ` +
    `${nameB} agree, trainctl's ids equal theirs in ${agreed - wrong}; ${disagreements.length} where they disagree` +
    (disagreements.length ? " (reported, not counted):" : ""));
  for (const line of disagreements) console.log(`  ${line}`);
  return wrong === 0;
}

function expectedText(family, corpusFile, out) {
  const texts = JSON.parse(fs.readFileSync(corpusFile, "utf8"));
  // Llama 2's ▁ stands for a space: one in the text decodes as a space, in Hugging Face's decoder too.
  const decoded = (text) => (family === "llama2" ? text.replaceAll("▁", " ") : text);
  fs.writeFileSync(out, texts.map((text) => kBosText[family] + decoded(text)).join(""));
}

async function bench(family, tokenizerFile, file) {
  const text = fs.readFileSync(file, "utf8");
  for (const [name, encode] of await oracles(family, tokenizerFile, false)) {
    const start = performance.now(), cpuStart = process.cpuUsage();
    encode(text);
    const cpu = process.cpuUsage(cpuStart);
    console.log(`${name} ${((performance.now() - start) / 1000).toFixed(3)} ${((cpu.user + cpu.system) / 1e6).toFixed(3)}`);
  }
}

const [command, ...args] = process.argv.slice(2);
if (command === "tokenizers") {
  fs.writeFileSync(path.join(args[0], "llama3.json"), JSON.stringify(llama3Json(await llama3Package())));
  fs.writeFileSync(path.join(args[0], "llama2.json"), JSON.stringify(llama2Json(await llama2Package())));
} else if (command === "corpus") await writeCorpus(args[0], Number(args[1]), false, args[2] ? Number(args[2]) : undefined);
else if (command === "special-corpus") await writeCorpus(args[0], Number(args[1]), true);
else if (command === "compare") {
  let same = await compare(args[0], args[1], args[2], args[3], false);
  if (args[4]) same = (await compare(args[0], args[1], args[4], args[5], true)) && same;
  if (!same) process.exit(1);
}
else if (command === "expected-text") expectedText(args[0], args[1], args[2]);
else if (command === "bench") await bench(args[0], args[1], args[2]);
else throw new Error(`unknown command ${command}`);
