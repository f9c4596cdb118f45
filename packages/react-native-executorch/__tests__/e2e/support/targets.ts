/**
 * The two implementations of the native seam every e2e suite runs against: the real runner
 * (through the Node-API addon) and the fake native module the unit tests use. A test that
 * passes on both shows the fake behaves like the binding for what that test checks.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  LLMModule,
  models,
  ResourceFetcher,
  type GenerationConfig,
  type LLMDescriptor,
  type ModelFiles,
  type NativeExecutorch,
  type NativePlatformInfo,
} from '../../../src';
import { FakeNative } from '../../../src/testing/fakeNative';
import { HfServer, sha256 } from '../../support/hfServer';
import { nodeAdapters } from '../../support/nodeAdapters';
import { checkModelFiles } from './modelFiles';
import { createRealNative, smollm2Files, type Smollm2Files } from './realNative';

const PLATFORM: NativePlatformInfo = { os: 'android', isSimulator: false, osVersion: '34' };
/** SmolLM2's vocabulary and the KV capacity of the fp32 export (the registry's maxContext). */
const SMOLLM2_VOCAB = 49152;
export const SMOLLM2_MAX_CONTEXT = models.llm.smollm2_135m.variants.xnnpack.maxContext;

/** A fake answer long enough to interrupt: words spread over many pieces. */
function fakeAnswer(): string[] {
  const words = 'The capital of France is Paris, a city on the Seine known for its museums and cafes.';
  return Array.from({ length: 6 }, () => words.split(/(?= )/)).flat();
}

export interface SeamTarget {
  readonly name: string;
  /** True for the C++ runner: model-quality checks (the Paris answer) apply only there. */
  readonly real: boolean;
  create(): NativeExecutorch;
}

export const TARGETS: readonly SeamTarget[] = [
  { name: 'the real runner (Node-API addon)', real: true, create: () => createRealNative(PLATFORM) },
  {
    name: 'the fake native module',
    real: false,
    create: () =>
      new FakeNative({
        os: PLATFORM.os,
        answer: fakeAnswer,
        tokenIntervalMs: 3,
        checkLoad: (load) => checkModelFiles(load, SMOLLM2_VOCAB),
        maxContext: SMOLLM2_MAX_CONTEXT,
      }),
  },
];

export { smollm2Files, type Smollm2Files };

/** Serves the real SmolLM2 files on `server` and returns a registry entry with their sha256. */
export function publishSmollm2(
  server: HfServer,
  files: Smollm2Files,
  repo = 'e2e/smollm2',
  revision = 'fp32',
): LLMDescriptor<'xnnpack'> {
  const entries = [
    ['xnnpack/smollm2.pte', readFileSync(files.pte)],
    ['tokenizer.json', readFileSync(join(files.tokenizerDir, 'tokenizer.json'))],
    ['tokenizer_config.json', readFileSync(join(files.tokenizerDir, 'tokenizer_config.json'))],
  ] as const;
  for (const [path, body] of entries) server.add(repo, revision, path, { body });
  const [pte, tokenizer, config] = entries.map(([path, body]) => ({
    path,
    sha256: sha256(body),
    size: body.length,
  }));
  const smol = models.llm.smollm2_135m;
  return {
    ...smol,
    hf: { repo, revision },
    tokenizer: { status: 'published', chatTemplate: 'tokenizer_config.json', files: [tokenizer!, config!] },
    variants: {
      xnnpack: { ...smol.variants.xnnpack, quantization: 'fp32', status: 'published', files: [pte!] },
    },
  };
}

/** What {@link hostSmollm2} sets up for a suite; read it in tests and hooks, not at load time. */
export interface HostedSmollm2 {
  readonly server: HfServer;
  /** The suite's documents folder (the fetcher's cache), removed after the suite. */
  readonly docs: string;
  readonly model: LLMDescriptor<'xnnpack'>;
  /** The verified files of the suite's one download. */
  readonly files: ModelFiles;
  /** A fetcher that downloads from the server into `cacheDir` (default: `docs`). */
  fetcher(cacheDir?: string): ResourceFetcher;
}

/**
 * Registers the suite's hooks: before all its tests, the real SmolLM2 is published on a
 * 127.0.0.1 server and fetched once into a new documents folder (`docsPrefix`...); after them
 * the server stops and the folder is removed.
 */
export function hostSmollm2(docsPrefix: string): HostedSmollm2 {
  const server = new HfServer();
  let docs: string | undefined;
  let setUp: { docs: string; model: LLMDescriptor<'xnnpack'>; files: ModelFiles } | undefined;
  const get = () => {
    if (!setUp) throw new Error('hostSmollm2: read in a test or hook, after its beforeAll ran');
    return setUp;
  };
  const fetcherIn = (dir: string) => new ResourceFetcher({ ...nodeAdapters(dir), baseUrl: server.baseUrl });
  beforeAll(async () => {
    await server.start();
    docs = mkdtempSync(join(tmpdir(), docsPrefix));
    const model = publishSmollm2(server, smollm2Files());
    setUp = { docs, model, files: await fetcherIn(docs).fetchModel(model, 'xnnpack') };
  });
  afterAll(async () => {
    await server.stop();
    if (docs) rmSync(docs, { recursive: true, force: true });
  });
  return {
    server,
    get docs() {
      return get().docs;
    },
    get model() {
      return get().model;
    },
    get files() {
      return get().files;
    },
    fetcher: (cacheDir) => fetcherIn(cacheDir ?? get().docs),
  };
}

/**
 * The modules a `describe` block's tests make, each released after its test: `fresh()` loads one
 * on a seam of its own (a new process as far as the native side goes); a test pushes the other
 * modules it makes (sessions) onto `modules`.
 */
export function freshModules(
  smol: HostedSmollm2,
  target: SeamTarget,
  generation: GenerationConfig,
): { modules: LLMModule[]; fresh(): Promise<LLMModule> } {
  const modules: LLMModule[] = [];
  afterEach(() => modules.splice(0).forEach((m) => m.release()));
  const fresh = async () => {
    const llm = new LLMModule({ model: smol.model, localFiles: smol.files, native: target.create(), resources: smol.fetcher() });
    modules.push(llm);
    llm.configure({ generation });
    await llm.load();
    return llm;
  };
  return { modules, fresh };
}
