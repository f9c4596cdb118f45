/**
 * Gemma 4's own tool-call syntax, as its chat template writes calls and the model answers them:
 *
 *     <|tool_call>call:get_weather{city:<|"|>Kraków<|"|>,days:3,opts:{metric:true},tags:[<|"|>a<|"|>]}<tool_call|>
 *
 * Keys are bare (or `<|"|>`-quoted, as the template writes keys of nested declarations), strings
 * are quoted by the `<|"|>` token, numbers / true / false / null bare (`None` too, as Python's
 * Jinja prints it), objects `{...}` and lists `[...]`. Several calls may follow each other.
 *
 * A model's output is untrusted: reading a call never throws. Whatever does not parse (an
 * unclosed string or bracket, a bad escape, text after the arguments, nesting deeper than
 * {@link GEMMA4_MAX_NESTING}) becomes an error naming the tool, which the tool loop sends back
 * to the model. A JSON-quoted string (`"..."`, what a model trained on JSON may write) is read
 * as Python's `json.loads(strict=False)` reads it: raw newlines and tabs inside are kept as
 * written, an escape that JSON does not define is an error. A key such as `__proto__` is an
 * ordinary own key, as with `JSON.parse`. An integer past 2^53 (which a double would round) is
 * an error that asks for a string.
 */
import type { ToolCall } from '../llm/types';

// The syntax's markers are declared with the rest of Gemma 4's chat format.
import { GEMMA4_CALL_CLOSE, GEMMA4_CALL_OPEN, GEMMA4_QUOTE } from '../chat/formats/gemma4';

/** Objects and lists inside one another deeper than this make the call unreadable. */
export const GEMMA4_MAX_NESTING = 64;

class SyntaxFault extends Error {}

/** JSON's escapes (`\uXXXX` aside) and what they stand for. */
const JSON_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/** The tokens below are matched at `lastIndex` (sticky), so no read copies the rest of the text. */
const BARE_WORD = /[^,{}[\]\s]+/y;
const BARE_KEY = /[^:{}[\],<]+/y;
/** Numbers as Python and JSON print them; `0x10`, `1_000`, `Infinity` are not numbers here. */
const NUMBER = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A recursive-descent reader of one Gemma 4 value. */
class Reader {
  position = 0;
  private depth = 0;

  constructor(private readonly text: string) {}

  fail(what: string): never {
    const near = this.text.slice(this.position, this.position + 30);
    throw new SyntaxFault(`${what} at offset ${this.position}${near ? ` (near "${near}")` : ' (at the end)'}`);
  }

  skipSpace(): void {
    while (/\s/.test(this.text[this.position] ?? '')) this.position++;
  }

  at(token: string): boolean {
    return this.text.startsWith(token, this.position);
  }

  expect(token: string): void {
    this.skipSpace();
    if (!this.at(token)) this.fail(`expected "${token}"`);
    this.position += token.length;
  }

  get done(): boolean {
    return this.position >= this.text.length;
  }

  value(): unknown {
    this.skipSpace();
    if (this.at(GEMMA4_QUOTE)) return this.quoted();
    const c = this.text[this.position];
    if (c === '{') return this.object();
    if (c === '[') return this.list();
    // JSON-quoted strings: not Gemma 4's syntax, but what a model trained on JSON may write.
    if (c === '"') return this.jsonString();
    return this.bare();
  }

  private quoted(): string {
    this.position += GEMMA4_QUOTE.length;
    const end = this.text.indexOf(GEMMA4_QUOTE, this.position);
    if (end < 0) this.fail(`a string opened by ${GEMMA4_QUOTE} never closes`);
    const text = this.text.slice(this.position, end);
    this.position = end + GEMMA4_QUOTE.length;
    return text;
  }

  /** A `"..."` string, decoded as `json.loads(strict=False)` does (see the module comment). */
  private jsonString(): string {
    const start = this.position;
    let out = '';
    for (let i = start + 1; i < this.text.length; i++) {
      const c = this.text[i] as string;
      if (c === '"') {
        this.position = i + 1;
        return out;
      }
      if (c !== '\\') {
        out += c;
        continue;
      }
      const next = this.text[i + 1];
      const hex = this.text.slice(i + 2, i + 6);
      if (next !== undefined && next in JSON_ESCAPES) {
        out += JSON_ESCAPES[next];
        i++;
      } else if (next === 'u' && /^[0-9a-fA-F]{4}$/.test(hex)) {
        out += String.fromCharCode(parseInt(hex, 16));
        i += 5;
      } else {
        this.position = i;
        this.fail(`"\\${next ?? ''}" is not a JSON escape (write \\\\ for a backslash)`);
      }
    }
    this.position = start;
    return this.fail('a "string" never closes');
  }

  /** The token `pattern` (sticky) matches here, consumed; null when none. */
  private token(pattern: RegExp): string | null {
    pattern.lastIndex = this.position;
    const match = pattern.exec(this.text);
    if (!match) return null;
    this.position += match[0].length;
    return match[0];
  }

  private bare(): unknown {
    const word = this.token(BARE_WORD);
    if (word === null) return this.fail('expected a value');
    if (word === 'true' || word === 'True') return true;
    if (word === 'false' || word === 'False') return false;
    if (word === 'null' || word === 'None') return null;
    const number = Number(word);
    if (NUMBER.test(word) && Number.isFinite(number)) {
      // An integer a double cannot hold (an id, a phone number) would be rounded silently.
      if (/^-?\d+$/.test(word) && !Number.isSafeInteger(number)) {
        this.position -= word.length;
        this.fail(`the integer ${word} is too large to read exactly (quote it as a string)`);
      }
      return number;
    }
    this.position -= word.length;
    return this.fail(`"${word}" is not a value (strings are quoted by ${GEMMA4_QUOTE})`);
  }

  key(): string {
    this.skipSpace();
    if (this.at(GEMMA4_QUOTE)) return this.quoted();
    if (this.text[this.position] === '"') return this.jsonString();
    const key = this.token(BARE_KEY);
    if (key === null || key.trim() === '') this.fail('expected a key');
    return key.trim();
  }

  /** Counts one more level of nesting around `read`; too deep is a parse error, not a stack overflow. */
  private nested<T>(read: () => T): T {
    if (this.depth >= GEMMA4_MAX_NESTING) {
      this.fail(`objects and lists nest deeper than ${GEMMA4_MAX_NESTING} levels`);
    }
    this.depth++;
    try {
      return read();
    } finally {
      this.depth--;
    }
  }

  object(): Record<string, unknown> {
    return this.nested(() => {
      const out: Record<string, unknown> = {};
      this.items('{', '}', () => {
        const key = this.key();
        this.expect(':');
        // An own property whatever the key: `__proto__` must not set the object's prototype.
        Object.defineProperty(out, key, { value: this.value(), enumerable: true, writable: true, configurable: true });
      });
      return out;
    });
  }

  private list(): unknown[] {
    return this.nested(() => {
      const out: unknown[] = [];
      this.items('[', ']', () => out.push(this.value()));
      return out;
    });
  }

  /** `open`, then zero or more `read` items separated by commas, then `close`. */
  private items(open: string, close: string, read: () => void): void {
    this.expect(open);
    this.skipSpace();
    if (this.at(close)) {
      this.position++;
      return;
    }
    for (;;) {
      read();
      this.skipSpace();
      if (this.at(',')) {
        this.position++;
        continue;
      }
      this.expect(close);
      return;
    }
  }
}

/** One call's text between the markers (`call:NAME{...}`): the call, or why it is unreadable. */
export function parseGemma4Call(body: string): { call: ToolCall } | { error: string; toolName?: string } {
  const match = /^\s*call:([^{\s]+)\s*/.exec(body);
  if (!match) return { error: `a Gemma 4 tool call must read call:NAME{...}, got "${body.slice(0, 80)}"` };
  const toolName = match[1] as string;
  const reader = new Reader(body.slice(match[0].length));
  try {
    const args = reader.object();
    reader.skipSpace();
    if (!reader.done) reader.fail('unexpected text after the arguments');
    return { call: { toolName, arguments: args } };
  } catch (error) {
    if (!(error instanceof SyntaxFault)) throw error;
    return { error: `the arguments of "${toolName}" do not parse: ${error.message}`, toolName };
  }
}

/** All `<|tool_call>...<tool_call|>` blocks of `answer`; the last may run to the end unclosed. */
export function gemma4CallBlocks(answer: string): { bodies: string[]; rest: string } {
  const bodies: string[] = [];
  let rest = '';
  let position = 0;
  for (;;) {
    const open = answer.indexOf(GEMMA4_CALL_OPEN, position);
    if (open < 0) {
      rest += answer.slice(position);
      break;
    }
    rest += answer.slice(position, open);
    const start = open + GEMMA4_CALL_OPEN.length;
    const close = answer.indexOf(GEMMA4_CALL_CLOSE, start);
    bodies.push(answer.slice(start, close < 0 ? undefined : close));
    if (close < 0) break;
    position = close + GEMMA4_CALL_CLOSE.length;
  }
  return { bodies, rest };
}
