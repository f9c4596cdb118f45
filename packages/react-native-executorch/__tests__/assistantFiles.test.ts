/**
 * The assistant drafter's program (`variants.<backend>.assistant` in the registry): downloaded
 * only with `assistant: true`, then instead of the variant's own program, verified and resumed
 * like every download; `speculative: { drafter: 'assistant' }` needs it loaded; a variant without
 * one is an AssistantUnavailableError naming the variants that have one, before any download.
 * @jest-environment node
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  AssistantUnavailableError,
  LLMModule,
  ResourceFetcher,
  type LLMDescriptor,
  type LLMOptions,
} from '../src';
import { FakeNative } from '../src/testing/fakeNative';
import { codeOf } from './support/errorCode';
import { bytes, HfServer, sha256 } from './support/hfServer';
import { nodeAdapters } from './support/nodeAdapters';
import { ASSISTANT_PTE, publishOn, publishWithAssistant } from './support/publishedModel';

const PLAIN_PTE = 'xnnpack/smol.pte';

let server: HfServer;
let docs: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  docs = await mkdtemp(join(tmpdir(), 'rne-assistant-'));
});

afterEach(async () => {
  await server.stop();
  await rm(docs, { recursive: true, force: true });
});

function module(
  model: LLMDescriptor<'xnnpack'>,
  options: Partial<LLMOptions<LLMDescriptor<'xnnpack'>>> = {},
): { native: FakeNative; llm: LLMModule<LLMDescriptor<'xnnpack'>> } {
  const native = new FakeNative({ answer: () => ['yes', '.'] });
  const resources = new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl });
  return { native, llm: new LLMModule({ model, resources, native, ...options }) };
}

/** The repository paths the server was asked for. */
function requested(): string[] {
  return server.requests.map((r) => r.path.slice(r.path.indexOf('/resolve/r1/') + '/resolve/r1/'.length));
}

const ask = [{ role: 'user' as const, content: 'Repeat: yes.' }];

it('downloads the assistant program only when asked, then instead of the plain one', async () => {
  const model = publishWithAssistant(server);
  const plain = module(model);
  await plain.llm.load();
  expect(plain.native.loads[0]!.modelPath).toMatch(/\/xnnpack\/smol\.pte$/);
  expect(requested()).not.toContain(ASSISTANT_PTE);
  plain.llm.release();

  server.requests.length = 0;
  const fast = module(model, { assistant: true });
  await fast.llm.load();
  expect(fast.native.loads[0]!.modelPath).toMatch(/\/xnnpack\/smol_assistant\.pte$/);
  // The tokenizer came from the cache; only the assistant's program was fetched.
  expect(requested()).toEqual([ASSISTANT_PTE]);
  fast.llm.configure({ generationConfig: { speculative: { drafter: 'assistant', maxDraftTokens: 4 } } });
  await fast.llm.generate(ask);
  expect(fast.native.configs[0]).toMatchObject({ drafter: 'assistant', maxDraftTokens: 4 });
  fast.llm.release();
});

it('never fetches the plain program when the assistant is asked for; progress reaches 1', async () => {
  const model = publishWithAssistant(server);
  const { llm } = module(model, { assistant: true });
  const progress: number[] = [];
  await llm.load({ onDownloadProgress: (p) => progress.push(p) });
  expect(requested()).not.toContain(PLAIN_PTE);
  expect(requested()).toContain(ASSISTANT_PTE);
  expect(progress[progress.length - 1]).toBe(1);
  llm.release();
});

it('resumes a dropped assistant download and refuses one whose bytes differ', async () => {
  const resumed = publishWithAssistant(server, { dropAfter: 40_000, dropTimes: 1 });
  const first = module(resumed, { assistant: true });
  await first.llm.load();
  const asked = server.requests.filter((r) => r.path.endsWith(ASSISTANT_PTE));
  expect(asked.map((r) => r.range)).toEqual([undefined, expect.stringMatching(/^bytes=\d+-/)]);
  first.llm.release();

  // Another revision whose assistant is served with other bytes than the registry's checksum.
  const model = publishWithAssistant(server, {}, 'acme/smol-published', 'r2');
  const corrupt = {
    ...model,
    variants: {
      xnnpack: { ...model.variants.xnnpack, assistant: { ...model.variants.xnnpack.assistant!, sha256: 'ab'.repeat(32) } },
    },
  } as LLMDescriptor<'xnnpack'>;
  const second = module(corrupt, { assistant: true });
  expect(await codeOf(second.llm.load())).toBe('checksum_mismatch');
  expect(second.native.loads).toEqual([]);
});

it('refuses assistant: true on a variant without one, naming those with one, before any download', async () => {
  const { llm, native } = module(publishOn(server), { assistant: true });
  const error = await llm.load().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(AssistantUnavailableError);
  const typed = error as AssistantUnavailableError;
  expect(typed.code).toBe('assistant_unavailable');
  expect(typed.variants).toEqual([{ model: 'gemma4_e2b', backend: 'xnnpack' }]);
  expect(typed.message).toBe(
    'SmolLM2 135M Instruct has no assistant drafter for its xnnpack variant, so it cannot be loaded with ' +
      'assistant: true. Variants with one: gemma4_e2b (xnnpack). Load without it, or use speculative: ' +
      "{ drafter: 'promptLookup' }.",
  );
  expect(server.requests).toEqual([]);
  expect(native.loads).toEqual([]);
});

it("refuses drafter 'assistant' on a model loaded without it, and leaves the conversation", async () => {
  const { llm, native } = module(publishWithAssistant(server));
  await llm.load();
  await llm.sendMessage('Hi');
  const history = llm.messageHistory;
  llm.configure({ generationConfig: { speculative: { drafter: 'assistant' } } });
  const error = await llm.sendMessage('Again').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(AssistantUnavailableError);
  expect((error as AssistantUnavailableError).message).toMatch(
    /^SmolLM2 135M Instruct was loaded without its assistant drafter, .*Create the module with assistant: true/,
  );
  expect((error as AssistantUnavailableError).variants).toContainEqual({ model: 'smollm2_135m', backend: 'xnnpack' });
  expect(llm.messageHistory).toBe(history);
  expect(native.configs).toHaveLength(1);
  llm.release();

  const without = module(publishOn(server));
  await without.llm.load();
  without.llm.configure({ generationConfig: { speculative: { drafter: 'assistant' } } });
  const none = await without.llm.generate(ask).catch((e: unknown) => e);
  expect(none).toBeInstanceOf(AssistantUnavailableError);
  expect((none as Error).message).toMatch(
    /^SmolLM2 135M Instruct has no assistant drafter for its xnnpack variant, so it cannot draft with speculative/,
  );
  without.llm.release();
});

it('refuses an unpublished assistant before any download', async () => {
  const model = publishWithAssistant(server);
  const { path, sourceRepo, verifyTokens } = model.variants.xnnpack.assistant!;
  const unpublished = {
    ...model,
    variants: { xnnpack: { ...model.variants.xnnpack, assistant: { status: 'unpublished', path, sourceRepo, verifyTokens } } },
  } as LLMDescriptor<'xnnpack'>;
  const { llm } = module(unpublished, { assistant: true });
  expect(await codeOf(llm.load())).toBe('model_unpublished');
  expect(server.requests).toEqual([]);
});

it('checks a local modelPath against the assistant program with assistant: true', async () => {
  const model = publishWithAssistant(server);
  const fetched = await new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }).fetchModel(model, 'xnnpack');
  const local = { ...fetched, modelPath: join(docs, 'copy.pte') };
  await writeFile(local.modelPath, Buffer.from('not the assistant program'));
  const { llm, native } = module(model, { assistant: true, localFiles: local });
  expect(await codeOf(llm.load())).toBe('checksum_mismatch');
  expect(native.loads).toEqual([]);
});

it("checks memory against the assistant program's own peak, else the variant's", async () => {
  const model = publishWithAssistant(server);
  const variant = model.variants.xnnpack;
  const peak = variant.peakMemoryBytes!;
  const heavier = {
    ...model,
    variants: { xnnpack: { ...variant, assistant: { ...variant.assistant!, peakMemoryBytes: peak + 1000 } } },
  } as LLMDescriptor<'xnnpack'>;
  const native = (available: number) => new FakeNative({ availableMemoryBytes: available, answer: () => ['ok'] });

  const refused = native(peak);
  const fast = new LLMModule({
    model: heavier,
    assistant: true,
    resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
    native: refused,
  });
  expect(await codeOf(fast.load())).toBe('insufficient_memory');
  expect(server.requests).toEqual([]);

  const plainNative = native(peak);
  const plain = new LLMModule({
    model: heavier,
    resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
    native: plainNative,
  });
  await plain.load();
  expect(plainNative.loads[0]!.peakMemoryBytes).toBe(peak);
  plain.release();

  // Not measured: the variant's peak is the (lower-bound) need.
  const unmeasured = native(peak);
  const llm = new LLMModule({
    model,
    assistant: true,
    resources: new ResourceFetcher({ ...nodeAdapters(docs), baseUrl: server.baseUrl }),
    native: unmeasured,
  });
  await llm.load();
  expect(unmeasured.loads[0]!.peakMemoryBytes).toBe(peak);
  llm.release();
});

it("keeps a variant's other files and finds its program wherever it is listed", async () => {
  const model = publishWithAssistant(server);
  const extra = bytes(2000, 5);
  server.add('acme/smol-published', 'r1', 'xnnpack/extra.bin', { body: extra });
  const file = { path: 'xnnpack/extra.bin', sha256: sha256(extra), size: extra.length };
  const variant = model.variants.xnnpack;
  const withExtra = {
    ...model,
    variants: { xnnpack: { ...variant, files: [file, ...variant.files] } },
  } as LLMDescriptor<'xnnpack'>;
  expect(ResourceFetcher.filesOf(withExtra, 'xnnpack').map((f) => f.path)).toEqual([
    PLAIN_PTE, 'xnnpack/extra.bin', 'tokenizer.json', 'tokenizer_config.json',
  ]);
  expect(ResourceFetcher.filesOf(withExtra, 'xnnpack', { assistant: true }).map((f) => f.path)).toEqual([
    ASSISTANT_PTE, 'xnnpack/extra.bin', 'tokenizer.json', 'tokenizer_config.json',
  ]);
  for (const assistant of [false, true]) {
    const { llm, native } = module(withExtra, { assistant });
    await llm.load();
    expect(native.loads[0]!.modelPath.endsWith(assistant ? ASSISTANT_PTE : PLAIN_PTE)).toBe(true);
    llm.release();
  }
});
