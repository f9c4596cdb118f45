/**
 * A seeded fuzz of the tool-call parser (`parseToolCalls`): a model's answer is untrusted input,
 * so reading it must never throw, and must never read a call the model did not write.
 *
 * The oracle:
 * - well-formed Gemma 4 calls (generated values: strings with quotes, backslashes, newlines and
 *   brackets, `<|"|>`- or JSON-quoted, numbers, booleans, null, nested objects and lists, keys
 *   such as `__proto__`, whitespace between tokens, text around) read back exactly: the same
 *   tool, the same arguments (own keys, plain objects), the same text around;
 * - the same calls broken in ways that always break them (cut short, a closing bracket or a
 *   colon dropped, a bad JSON escape, nesting past the limit, text after the arguments, a bare
 *   word) are reported in `errors`, naming the tool, and a good call beside them still reads;
 * - random token soup, read in both syntaxes: no exception, and a call it yields reads back the
 *   same when written again (no value the parser invents).
 * `RNE_FUZZ_SEED` picks another seed; the counts are printed.
 * @jest-environment node
 */
import { parseToolCalls, type ParsedAnswer } from '../src';
import { GEMMA4_MAX_NESTING } from '../src/tools/gemma4';
import { rng } from './support/rng';

const SEED = Number(process.env.RNE_FUZZ_SEED ?? 63);
const Q = '<|"|>';
const OPEN = '<|tool_call>';
const CLOSE = '<tool_call|>';

const counts = { cases: 0, roundTrips: 0, malformedReported: 0, soup: 0, soupCalls: 0, thrown: 0, wrong: 0 };
const failures: string[] = [];

afterAll(() => {
  console.log(
    `tool-call fuzz (seed ${SEED}): cases ${counts.cases}, well-formed read back ${counts.roundTrips}, ` +
      `malformed reported ${counts.malformedReported}, soup ${counts.soup} (calls read ${counts.soupCalls}), ` +
      `exceptions ${counts.thrown}, wrong reads ${counts.wrong}`,
  );
  expect(failures.slice(0, 5)).toEqual([]);
  expect(counts).toMatchObject({ thrown: 0, wrong: 0 });
});

const random = rng(SEED);
const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
const chance = (p: number) => random() < p;

/** An object with own keys only, `__proto__` included (as `JSON.parse` builds them). */
function own(entries: [string, unknown][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

const CHARS = ['a', 'Z', '7', ' ', '\\', '\n', '\t', '\r', '"', "'", '{', '}', '[', ']', ',', ':', '<', '|', '>', '/', 'ł', '😀', '\u0001', '\u2028'];
const KEYS = ['city', 'n', 'x_1', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'a', 'Z9'];

function genString(): string {
  let s = '';
  for (let i = int(0, 12); i > 0; i--) s += pick(CHARS);
  // The quote token cannot occur inside a string it quotes; the close marker ends the call.
  return s.split(Q).join('').split(CLOSE).join('');
}

function genNumber(): number {
  switch (int(0, 4)) {
    case 0:
      return int(1, 1000) * (chance(0.5) ? 1 : -1);
    case 1:
      return Number((random() * 2000 - 1000).toFixed(int(1, 6))) || 1;
    case 2:
      return Number(`${int(1, 9)}e${int(-30, 30)}`);
    case 3:
      return Number.MAX_SAFE_INTEGER;
    default:
      return 0;
  }
}

function genValue(depth: number): unknown {
  const kind = int(0, depth > 5 ? 3 : 5);
  if (kind === 0) return genString();
  if (kind === 1) return genNumber();
  if (kind === 2) return pick([true, false, null]);
  if (kind === 3) return genString();
  if (kind === 4) return Array.from({ length: int(0, 4) }, () => genValue(depth + 1));
  return genObject(depth + 1);
}

function genObject(depth: number): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  const seen = new Set<string>();
  for (let i = int(0, 4); i > 0; i--) {
    const key = chance(0.7) ? pick(KEYS) : genString().trim() || 'k';
    if (seen.has(key)) continue;
    seen.add(key);
    entries.push([key, genValue(depth)]);
  }
  return own(entries);
}

/** A piece of a written call; `structural` marks brackets, colons and commas outside strings. */
interface Token {
  readonly text: string;
  readonly structural?: boolean;
}

const space = (): Token => ({ text: chance(0.8) ? '' : pick([' ', '\n', '  ', '\t']) });
const punct = (text: string): Token => ({ text, structural: true });

/** `s` as a JSON string, each newline and tab raw or escaped at random, some characters as \u. */
function jsonQuoted(s: string): string {
  let out = '"';
  for (const c of s) {
    if (c === '"' || c === '\\') out += `\\${c}`;
    else if (c === '\n') out += chance(0.5) ? '\n' : '\\n';
    else if (c === '\t') out += chance(0.5) ? '\t' : '\\t';
    else if (c === '/' && chance(0.5)) out += '\\/';
    else if (c.charCodeAt(0) < 0x20 || (c.length === 1 && chance(0.1))) out += `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
    else out += c;
  }
  return `${out}"`;
}

function writeString(s: string): Token {
  return { text: chance(0.7) ? `${Q}${s}${Q}` : jsonQuoted(s) };
}

function writeKey(key: string): Token {
  // A bare key is read up to `:` and trimmed: only plain names are written bare.
  if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) && chance(0.8)) return { text: key };
  return writeString(key);
}

function writeValue(value: unknown, out: Token[]): void {
  out.push(space());
  if (typeof value === 'string') out.push(writeString(value));
  // A float past 2^53 as Python prints it (`8e+19`); as digits it would read as a too-large integer.
  else if (typeof value === 'number') out.push({ text: Number.isInteger(value) && !Number.isSafeInteger(value) ? value.toExponential() : String(value) });
  else if (value === true) out.push({ text: pick(['true', 'True']) });
  else if (value === false) out.push({ text: pick(['false', 'False']) });
  else if (value === null) out.push({ text: pick(['null', 'None']) });
  else if (Array.isArray(value)) {
    out.push(punct('['));
    value.forEach((v, i) => {
      if (i > 0) out.push(space(), punct(','));
      writeValue(v, out);
    });
    out.push(space(), punct(']'));
  } else writeObject(value as Record<string, unknown>, out);
}

function writeObject(value: Record<string, unknown>, out: Token[]): void {
  out.push(punct('{'));
  Object.keys(value).forEach((k, i) => {
    if (i > 0) out.push(space(), punct(','));
    out.push(space(), writeKey(k), space(), punct(':'));
    writeValue(value[k], out);
  });
  out.push(space(), punct('}'));
}

function argsTokens(args: Record<string, unknown>): Token[] {
  const out: Token[] = [];
  writeObject(args, out);
  return out;
}

const join = (tokens: readonly Token[]) => tokens.map((t) => t.text).join('');
const NAMES = ['get_weather', 'f', 'plan.trip', 'x-1', '__proto__'];
/** Text around calls: anything but the markers. */
const around = () => genString().split(OPEN).join('');

/** Parses, counting an exception (there must be none). */
function parse(answer: string, syntax: 'gemma4' | 'json', label: string): ParsedAnswer | null {
  counts.cases += 1;
  try {
    return parseToolCalls(answer, syntax);
  } catch (error) {
    counts.thrown += 1;
    failures.push(`${label}: threw ${String(error)} on ${JSON.stringify(answer.slice(0, 200))}`);
    return null;
  }
}

function wrong(label: string, answer: string, what: string): void {
  counts.wrong += 1;
  failures.push(`${label}: ${what} on ${JSON.stringify(answer.slice(0, 300))}`);
}

/** Plain objects with Object.prototype all the way down (no prototype set by a key). */
function plain(value: unknown): boolean {
  if (Array.isArray(value)) return value.every(plain);
  if (typeof value !== 'object' || value === null) return true;
  return Object.getPrototypeOf(value) === Object.prototype && Object.values(value).every(plain);
}

/**
 * Deep equality by own keys, prototypes and Object.is (jest's compares `.constructor`, which a
 * key named `constructor` overrides).
 */
function same(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const [ka, kb] = [Object.keys(a), Object.keys(b)];
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && same(own1(a, k), own1(b, k)));
}

/** The own property `key` of `o` (`o.__proto__` would read the prototype of an object without one). */
function own1(o: object, key: string): unknown {
  return Object.getOwnPropertyDescriptor(o, key)?.value;
}

describe('tool-call parser fuzz', () => {
  it('well-formed Gemma 4 calls read back exactly, with the text around them', () => {
    for (let i = 0; i < 600; i++) {
      const calls = Array.from({ length: int(1, 3) }, () => ({ toolName: pick(NAMES), arguments: genObject(0) }));
      const texts = calls.map(() => around());
      const tail = around();
      const answer =
        calls.map((c, j) => `${texts[j]}${OPEN}call:${c.toolName}${pick(['', ' '])}${join(argsTokens(c.arguments))}${CLOSE}`).join('') + tail;
      const parsed = parse(answer, 'gemma4', 'well-formed');
      if (!parsed) continue;
      if (parsed.errors.length > 0) wrong('well-formed', answer, `errors ${JSON.stringify(parsed.errors)}`);
      else if (!plain(parsed.calls.map((c) => c.arguments))) wrong('well-formed', answer, 'a prototype was set');
      else {
        if (!same(parsed.calls, calls)) wrong('well-formed', answer, `read ${JSON.stringify(parsed.calls)}`);
        else if (parsed.content !== (texts.join('') + tail).trim()) wrong('well-formed', answer, `content ${JSON.stringify(parsed.content)}`);
        else counts.roundTrips += 1;
      }
    }
  });

  type Breaker = (tokens: Token[]) => Token[] | null;
  const indexOf = (tokens: Token[], texts: string[]) => {
    const at = tokens.flatMap((t, i) => (t.structural && texts.includes(t.text) ? [i] : []));
    return at.length ? pick(at) : -1;
  };
  const BREAKERS: Record<string, Breaker> = {
    // Cut anywhere before the last `}` (the answer ended inside the call).
    cut: (tokens) => {
      const text = join(tokens);
      return [{ text: text.slice(0, int(0, text.length - 1)) }];
    },
    dropCloser: (tokens) => {
      const i = indexOf(tokens, ['}', ']']);
      return i < 0 ? null : tokens.filter((_, j) => j !== i);
    },
    dropColon: (tokens) => {
      const i = indexOf(tokens, [':']);
      return i < 0 ? null : tokens.filter((_, j) => j !== i);
    },
    badEscape: (tokens) => [
      punct('{'),
      { text: `bad:"x${pick(['\\q', '\\x41', "\\'", '\\a', '\\0', '\\u12G4', '\\U0041', '\\'])}${pick(['', 'y"'])}` },
      ...(chance(0.5) ? [punct(','), ...tokens.slice(1)] : [punct('}')]),
    ],
    tooDeep: (tokens) => {
      const depth = GEMMA4_MAX_NESTING + int(0, 20_000);
      const [open, close] = chance(0.5) ? ['[', ']'] : ['{k:', '}'];
      return [punct('{'), { text: `deep:${open.repeat(depth)}1${close.repeat(depth)}` }, punct('}')];
    },
    trailing: (tokens) => [...tokens, { text: pick(['x', ',', '}', ']', ' 1', `${Q}`, '{}']) }],
    bareWord: (tokens) => [
      punct('{'),
      { text: `v:${pick(['hello', '0x10', '1_000', 'Infinity', 'NaN', 'undefined', '--1', '1e999', '.', '-', '9007199254740993', '-12345678901234567890'])}` },
      ...(chance(0.5) ? [punct(','), ...tokens.slice(1)] : [punct('}')]),
    ],
  };

  it('malformed calls are reported as errors naming the tool; the good call beside them still reads', () => {
    const names = Object.keys(BREAKERS);
    for (let i = 0; i < 700; i++) {
      const how = names[i % names.length]!;
      const args = genObject(0);
      const broken = BREAKERS[how]!(argsTokens(args));
      if (!broken) continue;
      const name = pick(NAMES.filter((n) => n !== 'f'));
      const good = { toolName: 'f', arguments: own([['ok', int(0, 9)]]) };
      const before = around();
      // A cut call runs to the end of the answer; others are closed and followed by a good call.
      const answer =
        how === 'cut'
          ? `${before}${OPEN}call:f{ok:${good.arguments.ok as number}}${CLOSE}${OPEN}call:${name}${join(broken)}`
          : `${before}${OPEN}call:${name}${join(broken)}${CLOSE}${OPEN}call:f{ok:${good.arguments.ok as number}}${CLOSE}`;
      const parsed = parse(answer, 'gemma4', how);
      if (!parsed) continue;
      const label = `malformed (${how})`;
      if (parsed.errors.length !== 1 || parsed.errorTools?.[0] !== name) {
        wrong(label, answer, `errors ${JSON.stringify(parsed.errors)} tools ${JSON.stringify(parsed.errorTools)}`);
      } else if (!parsed.errors[0]!.includes(`"${name}"`)) {
        wrong(label, answer, `the error does not name the tool: ${parsed.errors[0]}`);
      } else if (!same(parsed.calls, [good]) || parsed.content !== before.trim()) {
        wrong(label, answer, `calls ${JSON.stringify(parsed.calls)} content ${JSON.stringify(parsed.content)}`);
      } else {
        counts.malformedReported += 1;
      }
    }
  });

  it('the reported faults: a backslash, a raw newline, deep nesting', () => {
    const read = (args: string) => parseToolCalls(`${OPEN}call:f${args}${CLOSE}`, 'gemma4');
    // A raw newline inside a JSON string is kept (json.loads(strict=False)); a valid escape is decoded.
    expect(read('{a:"x\ny\\\\z\\u0041"}').calls).toEqual([{ toolName: 'f', arguments: { a: 'x\ny\\zA' } }]);
    expect(read('{a:"x\\qy"}').errors[0]).toMatch(/"\\q" is not a JSON escape/);
    for (const deep of ['['.repeat(100_000), '{a:'.repeat(100_000), `${'['.repeat(50_000)}1${']'.repeat(50_000)}`]) {
      expect(read(`{a:${deep}}`).errors[0]).toMatch(new RegExp(`nest deeper than ${GEMMA4_MAX_NESTING} levels`));
    }
    // As deep as allowed still reads.
    const limit = GEMMA4_MAX_NESTING - 1;
    expect(read(`{a:${'['.repeat(limit)}1${']'.repeat(limit)}}`).errors).toEqual([]);
    expect(read('{id:12345678901234567890}').errors[0]).toMatch(/the integer 12345678901234567890 is too large to read exactly/);
    expect(read(`{id:${Number.MAX_SAFE_INTEGER},x:1e+30}`).calls[0]!.arguments).toEqual({ id: Number.MAX_SAFE_INTEGER, x: 1e30 });
    const polluted = read('{__proto__:{polluted:1}}').calls[0]!.arguments;
    expect(Object.getPrototypeOf(polluted)).toBe(Object.prototype);
    expect(Object.keys(polluted)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('random token soup: never an exception, and a call read from it is read again the same', () => {
    const SOUP = ['{', '}', '[', ']', ':', ',', Q, '"', '\\', '\n', ' ', 'a', '1', '-', '.', 'e', 'true', 'None', OPEN, CLOSE, 'call:', 'f', 'ł', '"name"', '"arguments"', '<tool_call>', '</tool_call>', '<|python_tag|>'];
    for (let i = 0; i < 3000; i++) {
      let answer = '';
      if (chance(0.5)) {
        answer = chance(0.5) ? `${OPEN}call:f{` : '';
        for (let n = int(1, 40); n > 0; n--) answer += pick(SOUP);
      } else {
        // A well-formed call with a few tokens inserted or characters deleted.
        answer = `${OPEN}call:f${join(argsTokens(genObject(0)))}${CLOSE}`;
        for (let n = int(1, 3); n > 0; n--) {
          const at = int(0, answer.length);
          answer = chance(0.5) ? answer.slice(0, at) + pick(SOUP) + answer.slice(at) : answer.slice(0, at) + answer.slice(at + 1);
        }
      }
      for (const syntax of ['gemma4', 'json'] as const) {
        counts.soup += 1;
        const parsed = parse(answer, syntax, `soup ${syntax}`);
        if (!parsed) continue;
        if (!plain(parsed.calls.map((c) => c.arguments))) wrong('soup', answer, 'a prototype was set');
        for (const call of parsed.calls) {
          counts.soupCalls += 1;
          // Written again in the same syntax, the call must read back as itself.
          const again =
            syntax === 'gemma4' && answer.includes(OPEN)
              ? parseToolCalls(`${OPEN}call:${call.toolName}${join(argsTokens(call.arguments))}${CLOSE}`, 'gemma4')
              : parseToolCalls(`<tool_call>${JSON.stringify({ name: call.toolName, arguments: call.arguments })}</tool_call>`, 'json');
          if (!same(again.calls, [call])) {
            wrong('soup', answer, `${JSON.stringify(call)} reads back as ${JSON.stringify(again)}`);
          }
        }
      }
    }
  });
});
