/**
 * The jest double of the native template engine (NativeExecutorch.renderChatTemplate, the C++
 * engine of cpp/chat that every host renders with): `@huggingface/jinja` with Python's Jinja
 * behaviour added. Why a second engine here: jest runs before anything native is built (and on
 * machines without a toolchain) and the seam's call is synchronous, so the fake native cannot
 * reach the C++ engine; the app bundle does not import this module. What users get is checked on
 * the real engine: tests/chat/test_chat_template_render.py (43 templates against transformers) and the
 * end-to-end jest suites on the Node addon. The double renders the repository's fixtures as
 * transformers does (the jest suites check it), which is what the unit tests of LLMModule need.
 *
 * Rendering chat templates with `@huggingface/jinja` the way Python's Jinja (what transformers'
 * `apply_chat_template` uses) renders them. The library leaves out some of Python Jinja's
 * behaviour that real templates rely on (Gemma 4's among them); this module adds it around the
 * library, through its public `Interpreter.evaluate`, without touching the library itself:
 *
 * - `select` / `reject` with a test (`types | reject('equalto', 'null')`) or without (truthiness);
 * - `map('upper')`: `map` with a filter name applies that filter to each item;
 * - `upper` / `lower` of a list or a dict: Python stringifies it first (`"['STRING', 'NULL']"`);
 * - printing `none` writes `None`, and `true` / `false` write `True` / `False`;
 * - reading an attribute or item of an undefined value is an error, as in Python
 *   (`tool['function']['name']` of a tool without `function`);
 * - the globals `apply_chat_template` provides: `raise_exception`, `strftime_now` (English month
 *   names, as Python's C locale), `range`, and `true` / `false` / `none` in both spellings.
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import type { ChatTemplateRequest, ChatTemplateResponse, TextPromptPart } from '../native/seam';

type Program = Template['parsed'];
type RuntimeValue = ReturnType<Interpreter['evaluate']>;
type Statement = Parameters<Interpreter['evaluate']>[0];
/** The loose shape of AST nodes and runtime values this module inspects. */
interface Node {
  readonly type: string;
  readonly [field: string]: unknown;
}

/** A value already evaluated, put back into the tree so the library does not evaluate it twice. */
const EVALUATED = 'RneEvaluated';
/** An expression whose value is printed (`{{ ... }}` or bare text): Python's str() applies. */
const OUTPUT = 'RneOutput';

/** Statement kinds whose bodies hold printed expressions (the rest of the tree is expressions). */
const BODIES: Readonly<Record<string, readonly string[]>> = {
  Program: ['body'],
  If: ['body', 'alternate'],
  For: ['body', 'defaultBlock'],
  Macro: ['body'],
  CallStatement: ['body'],
  FilterStatement: ['body'],
};
const STATEMENTS = new Set([...Object.keys(BODIES), 'Set', 'Break', 'Continue', 'Comment']);

/** Marks every expression printed directly by a body, so {@link PythonInterpreter} can str() it. */
function markOutputs(node: Node): void {
  for (const field of BODIES[node.type] ?? []) {
    const body = node[field] as Node[] | undefined;
    if (!Array.isArray(body)) continue;
    body.forEach((child, i) => {
      if (STATEMENTS.has(child.type)) markOutputs(child);
      else body[i] = { type: OUTPUT, expression: child };
    });
  }
  // `{% set x %}...{% endset %}` blocks print into their variable.
  if (node.type === 'Set' && Array.isArray(node.body)) markOutputs({ type: 'Program', body: node.body });
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
  'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** Python's `datetime.now().strftime(format)` for the directives chat templates use. */
export function strftime(date: Date, format: string): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return format.replace(/%[YmdbBaAHMSpyje%]/g, (token) => {
    switch (token) {
      case '%Y': return String(date.getFullYear());
      case '%y': return pad(date.getFullYear() % 100);
      case '%m': return pad(date.getMonth() + 1);
      case '%d': return pad(date.getDate());
      case '%e': return String(date.getDate()).padStart(2, ' ');
      case '%j': {
        const start = new Date(date.getFullYear(), 0, 1);
        return String(Math.floor((date.getTime() - start.getTime()) / 86_400_000) + 1).padStart(3, '0');
      }
      case '%b': return MONTHS[date.getMonth()]!.slice(0, 3);
      case '%B': return MONTHS[date.getMonth()]!;
      case '%a': return DAYS[date.getDay()]!.slice(0, 3);
      case '%A': return DAYS[date.getDay()]!;
      case '%H': return pad(date.getHours());
      case '%M': return pad(date.getMinutes());
      case '%S': return pad(date.getSeconds());
      case '%p': return date.getHours() < 12 ? 'AM' : 'PM';
      default: return '%';
    }
  });
}

function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() arg 3 must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** Python's repr() of a runtime value, as str() of a list or dict writes its items. */
function pythonRepr(value: Node): string {
  switch (value.type) {
    case 'StringValue': {
      const text = value.value as string;
      const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
      const escaped = text
        .replace(/\\/g, '\\\\')
        .replace(/\n/g, '\\n')
        .replace(/\r/g, '\\r')
        .replace(/\t/g, '\\t');
      return quote + (quote === "'" ? escaped.replace(/'/g, "\\'") : escaped) + quote;
    }
    case 'NullValue':
      return 'None';
    case 'UndefinedValue':
      return '';
    case 'BooleanValue':
      return value.value ? 'True' : 'False';
    case 'ArrayValue':
      return `[${(value.value as Node[]).map(pythonRepr).join(', ')}]`;
    case 'TupleValue': {
      const items = (value.value as Node[]).map(pythonRepr);
      return `(${items.join(', ')}${items.length === 1 ? ',' : ''})`;
    }
    case 'ObjectValue':
    case 'KeywordArgumentsValue': {
      const entries = [...(value.value as Map<string, Node>)].map(
        ([key, item]) => `${pythonRepr({ type: 'StringValue', value: key })}: ${pythonRepr(item)}`,
      );
      return `{${entries.join(', ')}}`;
    }
    default:
      return String((value as { toString(): string }).toString());
  }
}

/** Python's str(): strings as they are, everything else as repr() writes it. */
function pythonStr(value: Node): string {
  return value.type === 'StringValue' ? (value.value as string) : pythonRepr(value);
}

function filterName(filter: Node): { name: string; args: readonly Node[] } | null {
  if (filter.type === 'Identifier') return { name: filter.value as string, args: [] };
  if (filter.type === 'CallExpression' && (filter.callee as Node).type === 'Identifier') {
    return { name: (filter.callee as Node).value as string, args: filter.args as Node[] };
  }
  return null;
}

/** Python's `is <test>` checks that the library lacks, for `select` / `reject`. */
const EXTRA_TESTS: ReadonlyMap<string, (a: Node, b?: Node) => boolean> = new Map([
  ['ne', (a, b) => a.value !== b?.value],
  ['!=', (a, b) => a.value !== b?.value],
  ['==', (a, b) => a.value === b?.value],
  ['odd', (a) => (a.value as number) % 2 === 1],
  ['even', (a) => (a.value as number) % 2 === 0],
  ['lower', (a) => typeof a.value === 'string' && a.value === a.value.toLowerCase()],
  ['upper', (a) => typeof a.value === 'string' && a.value === a.value.toUpperCase()],
]);

/**
 * The library's interpreter with Python Jinja's behaviour where chat templates need it (see
 * the module comment). Values it makes come from the environment's own conversion
 * (`Environment.set`), since the library does not export its value classes.
 */
class PythonInterpreter extends Interpreter {
  private readonly scratch = new Environment();
  private scratchCount = 0;

  /** A runtime value of a plain JS value, made by the library itself. */
  private value(plain: unknown): RuntimeValue {
    return this.scratch.set(`v${this.scratchCount++}`, plain);
  }

  /** Re-evaluates `node` with `operand` already evaluated (no double evaluation). */
  private withOperand(node: Node, field: string, operand: RuntimeValue, environment: Environment): RuntimeValue {
    const rebuilt = { ...node, [field]: { type: EVALUATED, value: operand } };
    return super.evaluate(rebuilt as unknown as Statement, environment);
  }

  override evaluate(statement: Statement | undefined, environment: Environment): RuntimeValue {
    const node = statement as unknown as Node | undefined;
    switch (node?.type) {
      case EVALUATED:
        return node.value as RuntimeValue;
      case OUTPUT: {
        const result = this.evaluate(node.expression as Statement, environment) as unknown as Node;
        if (result.type === 'NullValue') return this.value('None');
        if (result.type === 'BooleanValue') return this.value(result.value ? 'True' : 'False');
        return result as unknown as RuntimeValue;
      }
      case 'MemberExpression': {
        const object = this.evaluate(node.object as Statement, environment);
        if (object.type === 'UndefinedValue') {
          throw new Error(`UndefinedError: an undefined value has no attribute or item (${describe(node)})`);
        }
        return this.withOperand(node, 'object', object, environment);
      }
      case 'FilterExpression': {
        const operand = this.evaluate(node.operand as Statement, environment);
        return (
          this.pythonFilter(operand as unknown as Node, node.filter as Node, environment) ??
          this.withOperand(node, 'operand', operand, environment)
        );
      }
      default:
        return super.evaluate(statement, environment);
    }
  }

  /** The filters the library lacks; null: the library's own applies. */
  private pythonFilter(operand: Node, filter: Node, environment: Environment): RuntimeValue | null {
    const parsed = filterName(filter);
    if (!parsed) return null;
    const { name, args } = parsed;
    const isList = operand.type === 'ArrayValue' || operand.type === 'TupleValue';
    if ((name === 'upper' || name === 'lower') && (isList || operand.type === 'ObjectValue')) {
      const text = pythonStr(operand);
      return this.value(name === 'upper' ? text.toUpperCase() : text.toLowerCase());
    }
    if (!isList) return null;
    const items = operand.value as RuntimeValue[];
    if (name === 'select' || name === 'reject') {
      const [testName, ...testArgs] = args.map((arg) => this.evaluate(arg as unknown as Statement, environment));
      let test: (item: RuntimeValue) => boolean = (item) => item.__bool__().value;
      if (testName) {
        const key = testName.value as string;
        const known = environment.tests.get(key) ?? EXTRA_TESTS.get(key);
        if (!known) throw new Error(`TemplateRuntimeError: no test named '${key}'`);
        test = (item) => (known as (...v: unknown[]) => boolean)(item, ...testArgs);
      }
      const keep = name === 'select';
      return this.list(items.filter((item) => test(item) === keep));
    }
    if (name === 'map' && args[0]?.type === 'StringLiteral') {
      const [first, ...rest] = args;
      const callee = { type: 'Identifier', value: first.value };
      const inner = rest.length ? { type: 'CallExpression', callee, args: rest } : callee;
      return this.list(
        items.map((item) =>
          this.evaluate(
            { type: 'FilterExpression', operand: { type: EVALUATED, value: item }, filter: inner } as unknown as Statement,
            environment,
          ),
        ),
      );
    }
    return null;
  }

  /** A list value holding `items` as they are. */
  private list(items: RuntimeValue[]): RuntimeValue {
    const list = this.value([]);
    (list as unknown as { value: RuntimeValue[] }).value = items;
    return list;
  }
}

function describe(node: Node): string {
  const property = node.property as Node | undefined;
  return property && 'value' in property ? `reading '${String(property.value)}'` : 'member access';
}

/** The globals transformers' `apply_chat_template` gives every template. */
function pythonGlobals(environment: Environment): void {
  for (const [name, value] of [
    ['false', false], ['true', true], ['none', null],
    ['False', false], ['True', true], ['None', null],
  ] as const) {
    environment.set(name, value);
  }
  environment.set('raise_exception', (message: unknown) => {
    throw new Error(`TemplateError: ${String(message)}`);
  });
  environment.set('strftime_now', (format: string) => strftime(new Date(), format));
  environment.set('range', range);
}

/** A parsed chat template, rendered with Python Jinja's behaviour. */
export class PythonJinjaTemplate {
  private readonly program: Program;

  /** Throws the library's parse error for a template that does not parse. */
  constructor(source: string) {
    this.program = new Template(source).parsed;
    markOutputs(this.program as unknown as Node);
  }

  render(variables: Readonly<Record<string, unknown>>): string {
    const environment = new Environment();
    pythonGlobals(environment);
    for (const [name, value] of Object.entries(variables)) {
      if (value !== undefined) environment.set(name, value);
    }
    const result = new PythonInterpreter(environment).run(this.program);
    return String(result.value);
  }
}

/** Parsed templates of {@link renderChatTemplateDouble}, by source. */
const parsed = new Map<string, PythonJinjaTemplate>();

/** NativeExecutorch.renderChatTemplate over {@link PythonJinjaTemplate}, the same JSON in and out. */
export function renderChatTemplateDouble(requestJson: string): string {
  const request = JSON.parse(requestJson) as ChatTemplateRequest;
  return JSON.stringify(answer(request));
}

function answer(request: ChatTemplateRequest): ChatTemplateResponse {
  let template = parsed.get(request.template);
  try {
    if (!template) {
      template = new PythonJinjaTemplate(request.template);
      parsed.set(request.template, template);
    }
  } catch (error) {
    return { error: { kind: 'TemplateSyntaxError', message: (error as Error).message, line: 0, column: 0 } };
  }
  if (request.check) return { ok: true };
  const messages = request.messages ?? [];
  const render = (chat: readonly Record<string, unknown>[]) =>
    (template as PythonJinjaTemplate).render({
      ...request.specialTokens,
      ...request.extra,
      messages: chat,
      tools: request.tools ?? null,  // None, as the C++ engine and transformers pass it
      add_generation_prompt: request.addGenerationPrompt ?? false,
    });
  let text: string;
  try {
    text = render(messages);
  } catch (error) {
    return { error: { kind: 'TemplateError', message: (error as Error).message, line: 0, column: 0 } };
  }
  if (!request.parts) return { prompt: text };
  const marks = markPair(text + JSON.stringify(messages));
  if (marks === null) return { prompt: text, parts: [{ text }], plainSpansFound: false };
  let marked: string;
  try {
    marked = render(messages.map((m) => markMessage(m, (content) => wrapContent(content, marks))));
  } catch {
    return { prompt: text, parts: [{ text }], plainSpansFound: false };
  }
  const parts = splitMarked(marked, text, marks);
  return parts ? { prompt: text, parts, plainSpansFound: true } : { prompt: text, parts: [{ text }], plainSpansFound: false };
}

/** The two characters around a content string while it is rendered in parts. */
interface Marks {
  readonly open: string;
  readonly close: string;
}

/** The first pair of private-use characters (U+E000...) that appears nowhere in `seen`. */
function markPair(seen: string): Marks | null {
  for (let code = 0xe000; code < 0xf8ff; code += 2) {
    const open = String.fromCharCode(code);
    const close = String.fromCharCode(code + 1);
    if (!seen.includes(open) && !seen.includes(close)) return { open, close };
  }
  return null;
}

/**
 * Whitespace Python's `str.strip()` (a template's `trim`) or JavaScript's `trim()` removes: it
 * stays outside the marks, so trimming still reaches it.
 */
const LEADING_SPACE = /^[\s\x1c-\x1f\x85]+/;
const TRAILING_SPACE = /[\s\x1c-\x1f\x85]+$/;

/** `content` with the marks inside its leading and trailing whitespace (none when it is blank). */
function wrapContent(content: string, { open, close }: Marks): string {
  const lead = LEADING_SPACE.exec(content)?.[0] ?? '';
  const rest = content.slice(lead.length);
  const trail = TRAILING_SPACE.exec(rest)?.[0] ?? '';
  if (rest.length === trail.length) return content;
  return lead + open + rest.slice(0, rest.length - trail.length) + close + trail;
}

/**
 * Roles whose content is template text: the model's own output. Every other role's (user,
 * system, developer, tool, ipython, ...) is plain text.
 */
const MODEL_ROLES = new Set(['assistant', 'model']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every string inside `value` (a tool's result) wrapped; keys as they are. */
function wrapStrings(value: unknown, wrap: (text: string) => string): unknown {
  if (typeof value === 'string') return wrap(value);
  if (Array.isArray(value)) return value.map((item) => wrapStrings(item, wrap));
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, wrapStrings(item, wrap)]));
}

/** A template message with its plain content (text, text parts, tool results) wrapped. */
function markMessage(message: Record<string, unknown>, wrap: (text: string) => string): Record<string, unknown> {
  const marked = { ...message };
  const { content } = message;
  if (!MODEL_ROLES.has(String(message.role))) {
    if (typeof content === 'string') {
      marked.content = wrap(content);
    } else if (Array.isArray(content)) {
      marked.content = content.map((part: unknown) =>
        isRecord(part) && part.type === 'text' && typeof part.text === 'string' ? { ...part, text: wrap(part.text) } : part,
      );
    }
  }
  // Gemma 4's form: tool results on the message whose calls they answer.
  if (Array.isArray(message.tool_responses)) {
    marked.tool_responses = message.tool_responses.map((response: unknown) =>
      isRecord(response) ? { ...response, response: wrapStrings(response.response, wrap) } : response,
    );
  }
  return marked;
}

/**
 * The parts of `marked` (a render with marks), or null unless the marks are balanced, not
 * nested, and removing them gives exactly `text` (the render without marks).
 */
function splitMarked(marked: string, text: string, { open, close }: Marks): TextPromptPart[] | null {
  const parts: TextPromptPart[] = [];
  let start = 0;
  let inside = false;
  for (let i = 0; i < marked.length; i += 1) {
    const c = marked[i];
    if (c !== open && c !== close) continue;
    if ((c === open) === inside) return null;
    const piece = marked.slice(start, i);
    if (piece) parts.push(inside ? { text: piece, plain: true } : { text: piece });
    inside = !inside;
    start = i + 1;
  }
  if (inside) return null;
  const rest = marked.slice(start);
  if (rest) parts.push({ text: rest });
  return parts.map((part) => part.text).join('') === text ? parts : null;
}
