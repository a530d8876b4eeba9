// The oracle of tests/integration/gpt2_tokenizer.sh and the peer of scripts/bench_tokenizer.sh:
// js-tiktoken's "gpt2" encoding, from the npm cache they install it into (TOKENIZER_NPM_DIR),
// writing what `trainctl data tokenize --tokenizer` must write, and the random texts both are given.
//   node tiktoken_oracle.mjs encode files|lines OUT.bin OUT.txt FILE...
//       llm.c's token file of the files' documents, each led by <|endoftext|> (50256), and the
//       text that decoding it must give back
//   node tiktoken_oracle.mjs random DIR COUNT SEED
//       COUNT random strings, DIR/00000.txt on, the same for a seed on every machine
//   node tiktoken_oracle.mjs random-text FILE COUNT SEED
//       the same strings, one after the other in FILE
//   node tiktoken_oracle.mjs bench FILE OUT.bin
//       encode's token file of FILE as one document, and the seconds the encoding alone took
//   node tiktoken_oracle.mjs compare EXPECTED.bin ACTUAL.bin
//       exit 1 at the first token that differs, showing both sides' text around it
//   node tiktoken_oracle.mjs encode-text TEXT
//       TEXT's tokens (no <|endoftext|>), as a JSON list
//   node tiktoken_oracle.mjs decode-tokens JSON
//       the text of a JSON list of tokens, on stdout as it is
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

import { randomStrings } from "./random_text.mjs";

const npmDir = process.env.TOKENIZER_NPM_DIR;
if (!npmDir) throw new Error("TOKENIZER_NPM_DIR is not set");
const require = createRequire(path.join(npmDir, "package.json"));
const { getEncoding } = require("js-tiktoken");

const kEndOfText = 50256;
const kHeaderInts = 256;

function readTokens(file) {
  const bytes = fs.readFileSync(file);
  const header = new Int32Array(bytes.buffer, bytes.byteOffset, kHeaderInts);
  return new Uint16Array(bytes.buffer.slice(bytes.byteOffset + 4 * kHeaderInts, bytes.byteOffset + bytes.length), 0, header[2]);
}

function writeTokens(file, tokens) {
  const header = new Int32Array(kHeaderInts);
  header.set([20240520, 1, tokens.length]);
  fs.writeFileSync(file, Buffer.concat([Buffer.from(header.buffer), Buffer.from(Uint16Array.from(tokens).buffer)]));
}

// The documents of a file as trainctl reads them: the whole file, or each non-empty line
// without its \n or \r\n.
function documentsOf(file, unit) {
  const text = fs.readFileSync(file).toString("utf8");
  if (unit === "files") return [text];
  return text.split("\n").map((line, i, lines) => (i < lines.length - 1 ? line.replace(/\r$/, "") : line)).filter((line) => line !== "");
}

function encode(unit, outTokens, outText, files) {
  const encoding = getEncoding("gpt2");
  const tokens = [];
  const texts = [];
  for (const file of files) {
    for (const document of documentsOf(file, unit)) {
      tokens.push(kEndOfText);
      // No special tokens: text that spells <|endoftext|> is text, as llm.c's encode_ordinary has it.
      for (const token of encoding.encode(document, [], [])) tokens.push(token);
      texts.push("<|endoftext|>", document);
    }
  }
  writeTokens(outTokens, tokens);
  fs.writeFileSync(outText, texts.join(""));
}

function writeRandomFiles(directory, count, seed) {
  fs.mkdirSync(directory, { recursive: true });
  randomStrings(count, seed).forEach((text, i) => fs.writeFileSync(path.join(directory, String(i).padStart(5, "0") + ".txt"), text));
}

function bench(file, outTokens) {
  const encoding = getEncoding("gpt2");
  const text = fs.readFileSync(file).toString("utf8");
  const start = performance.now();
  const tokens = encoding.encode(text, [], []);
  const seconds = (performance.now() - start) / 1000;
  tokens.unshift(kEndOfText);
  writeTokens(outTokens, tokens);
  console.log(seconds.toFixed(3));
}

function compare(expectedFile, actualFile) {
  const expected = readTokens(expectedFile);
  const actual = readTokens(actualFile);
  let at = 0;
  while (at < expected.length && at < actual.length && expected[at] === actual[at]) at++;
  if (at === expected.length && at === actual.length) return;
  const encoding = getEncoding("gpt2");
  const around = (tokens) => JSON.stringify(encoding.decode(Array.from(tokens.slice(Math.max(0, at - 8), at + 8))));
  console.error(`token ${at} differs (${expected.length} expected, ${actual.length} written)`);
  console.error(`  js-tiktoken: ${Array.from(expected.slice(at, at + 8))} in ${around(expected)}`);
  console.error(`  trainctl:    ${Array.from(actual.slice(at, at + 8))} in ${around(actual)}`);
  process.exit(1);
}

const [command, ...args] = process.argv.slice(2);
if (command === "encode") encode(args[0], args[1], args[2], args.slice(3));
else if (command === "random") writeRandomFiles(args[0], Number(args[1]), Number(args[2]));
else if (command === "random-text") fs.writeFileSync(args[0], randomStrings(Number(args[1]), Number(args[2])).join(""));
else if (command === "bench") bench(args[0], args[1]);
else if (command === "compare") compare(args[0], args[1]);
else if (command === "encode-text") console.log(JSON.stringify(getEncoding("gpt2").encode(args[0])));
else if (command === "decode-tokens") process.stdout.write(getEncoding("gpt2").decode(JSON.parse(args[0])));
else throw new Error(`unknown command ${command}`);
