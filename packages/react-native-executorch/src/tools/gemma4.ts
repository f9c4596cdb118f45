/**
 * Gemma 4's own tool-call syntax, as its chat template writes calls and the model answers them:
 *
 *     <|tool_call>call:get_weather{city:<|"|>Kraków<|"|>,days:3,opts:{metric:true},tags:[<|"|>a<|"|>]}<tool_call|>
 *
 * Keys are bare (or `<|"|>`-quoted, as the template writes keys of nested declarations), strings
 * are quoted by the `<|"|>` token, numbers / true / false / null bare (`None` too, as Python's
 * Jinja prints it), objects `{...}` and lists `[...]`. Several calls may follow each other.
 */
import type { ToolCall } from '../llm/types';

export const GEMMA4_CALL_OPEN = '<|tool_call>';
export const GEMMA4_CALL_CLOSE = '<tool_call|>';
export const GEMMA4_QUOTE = '<|"|>';
/** Opens a tool's response: the model writes it after its calls, the host fills it in. */
export const GEMMA4_RESPONSE_OPEN = '<|tool_response>';

class SyntaxFault extends Error {}

/** A recursive-descent reader of one Gemma 4 value. */
class Reader {
  position = 0;

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

  private jsonString(): string {
    const match = /^"(?:[^"\\]|\\.)*"/.exec(this.text.slice(this.position));
    if (!match) this.fail('a "string" never closes');
    this.position += match[0].length;
    return JSON.parse(match[0]) as string;
  }

  private bare(): unknown {
    const match = /^[^,{}[\]\s]+/.exec(this.text.slice(this.position));
    if (!match) this.fail('expected a value');
    const word = match[0];
    this.position += word.length;
    if (word === 'true' || word === 'True') return true;
    if (word === 'false' || word === 'False') return false;
    if (word === 'null' || word === 'None') return null;
    const number = Number(word);
    if (word.trim() !== '' && Number.isFinite(number) && /^-?[\d.]/.test(word)) return number;
    this.position -= word.length;
    return this.fail(`"${word}" is not a value (strings are quoted by ${GEMMA4_QUOTE})`);
  }

  key(): string {
    this.skipSpace();
    if (this.at(GEMMA4_QUOTE)) return this.quoted();
    if (this.text[this.position] === '"') return this.jsonString();
    const match = /^[^:{}[\],<]+/.exec(this.text.slice(this.position));
    if (!match || match[0].trim() === '') this.fail('expected a key');
    this.position += match[0].length;
    return match[0].trim();
  }

  object(): Record<string, unknown> {
    this.expect('{');
    const out: Record<string, unknown> = {};
    this.skipSpace();
    if (this.at('}')) {
      this.position++;
      return out;
    }
    for (;;) {
      const key = this.key();
      this.expect(':');
      out[key] = this.value();
      this.skipSpace();
      if (this.at(',')) {
        this.position++;
        continue;
      }
      this.expect('}');
      return out;
    }
  }

  private list(): unknown[] {
    this.expect('[');
    const out: unknown[] = [];
    this.skipSpace();
    if (this.at(']')) {
      this.position++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.skipSpace();
      if (this.at(',')) {
        this.position++;
        continue;
      }
      this.expect(']');
      return out;
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
