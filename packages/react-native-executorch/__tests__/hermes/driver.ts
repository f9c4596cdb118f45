/**
 * The JavaScript of the Hermes host check (tests/package/test_hermes_host.py): bundled with the package
 * by Metro (bundle.js), compiled to Hermes bytecode and run by cpp/hermes_host/ over the real JSI
 * binding; the same bundle also runs on Node over the Node-API addon (node_run.js), so the two
 * engines' answers can be compared. It drives LLMModule as an app does, through
 * `globalThis.__RNExecutorch` (no `native` option): load, a streamed answer, an interrupt, a
 * JSON-schema answer, a forced tool call, release, a garbage collection that must collect the
 * released module, and a second load that must find the first model's memory freed. A failed
 * check names its step; the last line is `RESULT <json>`. The package's modules load before the
 * globals below are installed (imports come first): none of them touches those at load time.
 */
import { LLMModule, models, type GenerationStats, type ResourceAdapters, type ToolCall } from '../../src';

/** What the host (hermes_host.cpp, or node_run.js on Node) gives the driver. */
interface Host {
  readonly engine: string;
  readonly args: { readonly pte: string; readonly tokenizerDir: string };
  print(line: string): void;
  now(): number;
  readText(path: string): string;
  stat(path: string): { size: number; isDirectory: boolean; mtimeMs: number } | null;
  collectGarbage(): void;
  /** Resident memory of the process, bytes. */
  residentBytes(): number;
  finish(code: number): void;
}
declare const __rneHost: Host;
const host = __rneHost;

// What React Native's InitializeCore installs and the package uses; a bare Hermes has neither.
// AbortController: the same module React Native's setUpXHR installs.
if (typeof AbortController === 'undefined') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const polyfill = require('abort-controller/dist/abort-controller');
  Object.assign(globalThis, { AbortController: polyfill.AbortController, AbortSignal: polyfill.AbortSignal });
}
if (typeof console === 'undefined') {
  const log = (...parts: unknown[]) => host.print(parts.map(String).join(' '));
  Object.assign(globalThis, { console: { log, info: log, warn: log, error: log, debug: log } });
}

function check(condition: boolean, step: string, what: string): void {
  if (!condition) throw new Error(`${step}: ${what}`);
}

function unavailable(name: string): () => never {
  return () => {
    throw new Error(`the Hermes host check reads local files only; ${name} is not available`);
  };
}

/** Local files through the host: all LLMModule reads with `localFiles`. */
const adapters: ResourceAdapters = {
  fs: {
    documentDirectory: '/nonexistent-rne-hermes-host',
    stat: async (path) => host.stat(path),
    readText: async (path) => host.readText(path),
    mkdir: unavailable('mkdir'),
    rename: unavailable('rename'),
    remove: unavailable('remove'),
    readDir: unavailable('readDir'),
    writeText: unavailable('writeText'),
    sha256: unavailable('sha256'),
  },
  http: { download: unavailable('download') },
};

const BOOK = {
  type: 'object',
  properties: {
    title: { type: 'string' },
    year: { type: 'integer' },
    genre: { enum: ['mystery', 'fantasy', 'science fiction'] },
    inPrint: { type: 'boolean' },
  },
  required: ['title', 'year', 'genre', 'inPrint'],
} as const;

const WEATHER = {
  name: 'get_weather',
  description: 'Current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
} as const;

const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

const GREEDY = { temperature: 0, maxNewTokens: 32 } as const;
const QUESTION = 'What is the capital of France?';

const SMOLLM2 = models.llm.smollm2_135m;
type SmolLM2Module = LLMModule<typeof SMOLLM2>;

function newModule(): SmolLM2Module {
  const { pte, tokenizerDir } = host.args;
  return new LLMModule({
    model: SMOLLM2,
    localFiles: {
      modelPath: pte,
      tokenizerPath: `${tokenizerDir}/tokenizer.json`,
      chatTemplatePath: `${tokenizerDir}/tokenizer_config.json`,
    },
    resources: adapters,
  });
}

/** Every step on one module, released at the end; only a WeakRef to it leaves. */
async function exercise(llm: SmolLM2Module) {
  let t = host.now();
  await llm.load();
  const loadMs = host.now() - t;
  check(llm.isReady && llm.backend === 'xnnpack', 'load', `not ready on xnnpack (${llm.backend})`);

  // A streamed answer (greedy: the same text on every engine).
  llm.configure({ generationConfig: GREEDY });
  const pieces: string[] = [];
  let firstTokenMs = -1;
  t = host.now();
  const answer = await llm.sendMessage(QUESTION, {
    onToken: (piece) => {
      if (pieces.length === 0) firstTokenMs = host.now() - t;
      pieces.push(piece);
    },
  });
  const streamStats = llm.stats as GenerationStats;
  check(pieces.length > 1, 'stream', `${pieces.length} piece(s) streamed`);
  check(pieces.join('') === answer, 'stream', 'the streamed pieces do not add up to the answer');
  check(/paris/i.test(answer), 'stream', `the answer does not name Paris: ${JSON.stringify(answer)}`);

  // Interrupted from the token callback, as a stop button does.
  llm.configure({ generationConfig: { maxNewTokens: 200 } });
  let streamed = 0;
  const story = await llm.sendMessage('Write a long story about a dragon and a knight.', {
    onToken: () => {
      streamed += 1;
      if (streamed === 3) llm.interrupt();
    },
  });
  const interruptStats = llm.stats as GenerationStats;
  check(interruptStats.stopReason === 'interrupted', 'interrupt', `stopped by ${interruptStats.stopReason}`);
  check(interruptStats.generatedTokens < 20, 'interrupt', `${interruptStats.generatedTokens} tokens after the interrupt`);

  // One JSON document valid against the schema (grammar-constrained sampling in C++).
  llm.clearHistory();
  llm.configure({ generationConfig: { maxNewTokens: 80, repetitionPenalty: 1.2 } });
  const json = await llm.generate([{ role: 'user', content: 'Describe a fictional book as JSON.' }], {
    responseFormat: BOOK,
  });
  const book = JSON.parse(json);
  check(
    Object.keys(book).join() === 'title,year,genre,inPrint' && Number.isInteger(book.year) &&
      BOOK.properties.genre.enum.includes(book.genre) && typeof book.inPrint === 'boolean',
    'json schema', `the answer does not fit the schema: ${json}`,
  );

  // A forced tool call: constrained to the tool's schema, the callback runs, the model answers.
  const calls: ToolCall[] = [];
  llm.configure({
    chatConfig: { initialMessageHistory: [] },
    generationConfig: { maxNewTokens: 48, repetitionPenalty: 1 },
    toolsConfig: {
      tools: [WEATHER],
      toolChoice: { name: 'get_weather' },
      executeToolCallback: async (call) => {
        calls.push(call);
        return 'Sunny, 24 degrees.';
      },
    },
  });
  const toolAnswer = await llm.sendMessage('What is the weather in Paris?');
  check(JSON.stringify(calls) === JSON.stringify([{ toolName: 'get_weather', arguments: { city: 'Paris' } }]),
    'tool call', `calls: ${JSON.stringify(calls)}`);
  check(/24/.test(toolAnswer), 'tool call', `the answer does not use the result: ${JSON.stringify(toolAnswer)}`);

  const residentInUse = host.residentBytes();
  llm.release();
  check(!llm.isReady, 'release', 'still ready after release()');
  return {
    released: new WeakRef(llm),
    residentInUse,
    texts: { answer, json, toolCalls: calls, toolAnswer },
    // How many tokens arrive after interrupt() depends on timing: only a prefix is the same.
    interrupted: story,
    numbers: {
      loadMs: Math.round(loadMs),
      firstTokenMs: Math.round(firstTokenMs),
      tokensPerSecond: Number(streamStats.tokensPerSecond.toFixed(1)),
      prefillTokensPerSecond: Number(streamStats.prefillTokensPerSecond.toFixed(1)),
      generatedTokens: streamStats.generatedTokens,
    },
  };
}

async function run(): Promise<Record<string, unknown>> {
  const residentBefore = host.residentBytes();
  const { released, residentInUse, texts, interrupted, numbers } = await exercise(newModule());
  // Nothing references the released module now: a collection must take it.
  await nextTask(); // a WeakRef keeps its target until the job that made it ends
  host.collectGarbage();
  check(released.deref() === undefined, 'gc', 'the released LLMModule survived a garbage collection');

  // The allocator keeps a freed model's memory for the next one: loaded again, the process
  // grows little, where a model that was never freed would add its size again.
  const again = newModule();
  await again.load();
  again.configure({ generationConfig: GREEDY });
  const answerAgain = await again.sendMessage(QUESTION);
  const residentAgain = host.residentBytes();
  again.release();
  check(answerAgain === texts.answer, 'reload', `another answer after a reload: ${JSON.stringify(answerAgain)}`);
  const pteBytes = host.stat(host.args.pte)?.size ?? 0;
  check(residentAgain - residentInUse < pteBytes / 4, 'gc',
    `the process grew by ${residentAgain - residentInUse} bytes when the ${pteBytes}-byte model was ` +
      `loaded again after release (resident: ${residentBefore} before the first load, ` +
      `${residentInUse} before release, ${residentAgain} after the second load)`);

  return {
    engine: host.engine,
    texts: { ...texts, answerAgain },
    interrupted,
    numbers: {
      ...numbers,
      residentModelMB: Math.round((residentInUse - residentBefore) / 2 ** 20),
      residentGrowthOnReloadMB: Math.round((residentAgain - residentInUse) / 2 ** 20),
    },
  };
}

run().then(
  (result) => {
    host.print(`RESULT ${JSON.stringify(result)}`);
    host.finish(0);
  },
  (error: unknown) => {
    host.print(`FAILED ${error instanceof Error ? `${error.message}\n${error.stack ?? ''}` : String(error)}`);
    host.finish(1);
  },
);
