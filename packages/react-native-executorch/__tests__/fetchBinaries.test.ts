/**
 * scripts/fetch-binaries.js run as the podspec and Gradle run it (a child `node` process),
 * against a real HTTP server on 127.0.0.1 serving zip artifacts in the release layout.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { bytes, HfServer, sha256, type ServedFile } from './support/hfServer';
import { zip } from './support/zip';

const PACKAGE_DIR = resolve(__dirname, '..');
const SCRIPT = join(PACKAGE_DIR, 'scripts', 'fetch-binaries.js');
const VERSION: string = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')).version;
const REPO = 'software-mansion/react-native-executorch-binaries';
const TAG = `v${VERSION}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RNE_BINARIES')));
  return new Promise((done) => {
    execFile(process.execPath, [SCRIPT, ...args], { env: { ...clean, ...env } }, (error, stdout, stderr) => {
      done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A release artifact: the files, and rne-binaries.json listing their sha256. */
function artifact(files: Record<string, Buffer>, extra: Record<string, Buffer> = {}): Buffer {
  const manifest = {
    version: VERSION,
    files: Object.entries(files).map(([path, data]) => ({ path, size: data.length, sha256: sha256(data) })),
  };
  return zip({ 'rne-binaries.json': Buffer.from(JSON.stringify(manifest)), ...files, ...extra });
}

const HEADER = { 'include/executorch/extension/module/module.h': Buffer.from('#pragma once\n') };
const android = (abi: string, seed: number) => artifact({ [`${abi}/libexecutorch.so`]: bytes(300_000, seed), ...HEADER });
const ios = (seed: number) =>
  artifact({
    'ExecuTorch.xcframework/Info.plist': Buffer.from('<plist/>'),
    'ExecuTorch.xcframework/ios-arm64/libexecutorch.a': bytes(200_000, seed),
  });

const ARTIFACTS: Record<string, Buffer> = {
  'ios-all.zip': ios(1),
  'ios-cpu.zip': ios(2),
  'android-arm64-v8a-all.zip': android('arm64-v8a', 3),
  'android-x86_64-all.zip': android('x86_64', 4),
  'android-arm64-v8a-cpu.zip': android('arm64-v8a', 5),
  'android-x86_64-cpu.zip': android('x86_64', 6),
};

const entry = (name: string) => ({
  file: `${VERSION}/${name}`,
  sha256: sha256(ARTIFACTS[name]!),
  size: ARTIFACTS[name]!.length,
});

function lockFor(baseUrl: string, overrides: Record<string, unknown> = {}) {
  return {
    schema: 1,
    package: 'react-native-executorch',
    version: VERSION,
    base_url: `${baseUrl}/${REPO}/resolve/${TAG}`,
    artifacts: {
      ios: { all: entry('ios-all.zip'), cpu: entry('ios-cpu.zip') },
      android: {
        all: { 'arm64-v8a': entry('android-arm64-v8a-all.zip'), x86_64: entry('android-x86_64-all.zip') },
        cpu: { 'arm64-v8a': entry('android-arm64-v8a-cpu.zip'), x86_64: entry('android-x86_64-cpu.zip') },
      },
    },
    ...overrides,
  };
}

let server: HfServer;
let dir: string;
let cache: string;

function serve(overrides: Record<string, Partial<ServedFile>> = {}): void {
  for (const [name, body] of Object.entries(ARTIFACTS)) {
    server.add(REPO, TAG, `${VERSION}/${name}`, { body, ...overrides[name] });
  }
}

function writeLock(lock: object): string {
  const path = join(dir, 'binaries.lock.json');
  writeFileSync(path, JSON.stringify(lock));
  return path;
}

/** The cache holds finished artifacts only: no temporary unpack directory, no partial download. */
function expectNothingPartial(): void {
  const leftovers = existsSync(cache) ? readdirSync(cache).filter((n) => n.startsWith('.unpack-')) : [];
  expect(leftovers).toEqual([]);
}

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  dir = mkdtempSync(join(tmpdir(), 'rne-fetch-'));
  cache = join(dir, 'cache');
});

afterEach(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('downloads, checks and unpacks the iOS artifact, links it, and reuses it from the cache', async () => {
  serve();
  const lock = writeLock(lockFor(server.baseUrl));
  const link = join(dir, 'pkg', 'third-party', 'ios');
  const first = await run(['ios', '--lock', lock, '--cache', cache, '--link', link, '--json']);
  expect(first.stderr).toContain('downloading');
  expect(first.code).toBe(0);
  const out = JSON.parse(first.stdout);
  expect(out).toMatchObject({ platform: 'ios', backends: 'all', source: 'lock' });
  expect(out.dirs.ios).toBe(join(cache, sha256(ARTIFACTS['ios-all.zip']!)));
  expect(readFileSync(join(out.dirs.ios, 'ExecuTorch.xcframework/Info.plist'), 'utf8')).toBe('<plist/>');
  expect(readlinkSync(link)).toBe(out.dirs.ios);
  expect(readdirSync(join(cache, 'downloads'))).toEqual([]); // the zip is gone once unpacked

  const requests = server.requests.length;
  const second = await run(['ios', '--lock', lock, '--cache', cache, '--link', link, '--json']);
  expect(second.code).toBe(0);
  expect(JSON.parse(second.stdout).dirs).toEqual(out.dirs);
  expect(server.requests.length).toBe(requests);
});

it('gives each Android ABI its own directory, laid out as CMake reads it', async () => {
  serve();
  const lock = writeLock(lockFor(server.baseUrl));
  const result = await run(['android', '--lock', lock, '--cache', cache, '--json']);
  expect(result.code).toBe(0);
  const { dirs } = JSON.parse(result.stdout);
  expect(Object.keys(dirs)).toEqual(['arm64-v8a', 'x86_64']);
  for (const abi of ['arm64-v8a', 'x86_64']) {
    expect(existsSync(join(dirs[abi], abi, 'libexecutorch.so'))).toBe(true);
    expect(existsSync(join(dirs[abi], 'include/executorch/extension/module/module.h'))).toBe(true);
  }
  const only = await run(['android', '--abi', 'x86_64', '--lock', lock, '--cache', cache, '--json']);
  expect(Object.keys(JSON.parse(only.stdout).dirs)).toEqual(['x86_64']);
});

it('takes the CPU-only artifact when the backend set is "cpu"', async () => {
  serve();
  const lock = writeLock(lockFor(server.baseUrl));
  const result = await run(['android', '--abi', 'arm64-v8a', '--lock', lock, '--cache', cache, '--json'], {
    RNE_BINARIES_BACKENDS: 'cpu',
  });
  expect(result.code).toBe(0);
  expect(JSON.parse(result.stdout).dirs['arm64-v8a']).toBe(join(cache, sha256(ARTIFACTS['android-arm64-v8a-cpu.zip']!)));
  expect(server.requests.map((r) => r.path)).toEqual([`/${REPO}/resolve/${TAG}/${VERSION}/android-arm64-v8a-cpu.zip`]);
  const bad = await run(['ios', '--lock', lock, '--cache', cache], { RNE_BINARIES_BACKENDS: 'gpu' });
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('backend set "gpu"');
});

it('lets several builds fetch the same artifact at once: one download, one directory', async () => {
  serve({ 'ios-all.zip': { chunkSize: 16_384, chunkDelayMs: 5 } });
  const lock = writeLock(lockFor(server.baseUrl));
  // Six at once: each waiter reads the lock file while its owner creates or releases it.
  const runs = await Promise.all([0, 1, 2, 3, 4, 5].map(() => run(['ios', '--lock', lock, '--cache', cache, '--json'])));
  expect(runs.map((r) => (r.code === 0 ? '' : r.stderr))).toEqual(runs.map(() => ''));
  for (const r of runs) expect(JSON.parse(r.stdout).dirs).toEqual(JSON.parse(runs[0]!.stdout).dirs);
  expect(server.requests.length).toBe(1);
  expectNothingPartial();
});

it('takes over a lock its owner left behind, dead or before writing its pid', async () => {
  serve();
  const lock = writeLock(lockFor(server.baseUrl));
  const downloads = join(cache, 'downloads');
  mkdirSync(downloads, { recursive: true });
  const lockFile = join(downloads, `${sha256(ARTIFACTS['ios-all.zip']!)}.lock`);
  // A process that has exited: its pid names no live process.
  const dead = await new Promise<number>((done) => {
    const child = execFile(process.execPath, ['-e', '0'], () => done(child.pid!));
  });
  for (const content of [String(dead), '']) {
    rmSync(join(cache), { recursive: true, force: true });
    mkdirSync(downloads, { recursive: true });
    writeFileSync(lockFile, content);
    const result = await run(['ios', '--lock', lock, '--cache', cache, '--json']);
    expect(result.stderr).not.toContain('is held by process');
    expect(result.code).toBe(0);
    expect(existsSync(lockFile)).toBe(false);
  }
  expect(server.requests.length).toBe(2);
});

it('resumes a dropped connection with a Range request', async () => {
  const size = ARTIFACTS['ios-all.zip']!.length;
  serve({ 'ios-all.zip': { dropAfter: Math.floor(size / 2), dropTimes: 1 } });
  const lock = writeLock(lockFor(server.baseUrl));
  const result = await run(['ios', '--lock', lock, '--cache', cache, '--json']);
  expect(result.code).toBe(0);
  expect(result.stderr).toContain('resuming');
  expect(server.requests.map((r) => r.range)).toEqual([undefined, `bytes=${Math.floor(size / 2)}-`]);
  expect(existsSync(join(JSON.parse(result.stdout).dirs.ios, 'ExecuTorch.xcframework/Info.plist'))).toBe(true);
});

it('refuses a corrupt download, deletes it and leaves nothing unpacked', async () => {
  serve({ 'ios-all.zip': { faults: [{ kind: 'corrupt', at: 100 }] } });
  const lock = writeLock(lockFor(server.baseUrl));
  const result = await run(['ios', '--lock', lock, '--cache', cache]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(`${server.baseUrl}/${REPO}/resolve/${TAG}/${VERSION}/ios-all.zip sent`);
  expect(result.stderr).toContain('the download is corrupt or was altered and was deleted');
  expect(existsSync(join(cache, sha256(ARTIFACTS['ios-all.zip']!)))).toBe(false);
  expect(readdirSync(join(cache, 'downloads'))).toEqual([]);
  expectNothingPartial();
});

it('refuses an artifact with a path leaving its directory, unpacking nothing', async () => {
  const evil = artifact({ 'ExecuTorch.xcframework/Info.plist': Buffer.from('x') }, { '../escaped': Buffer.from('x') });
  server.add(REPO, TAG, `${VERSION}/ios-all.zip`, { body: evil });
  const lock = writeLock(
    lockFor(server.baseUrl, {
      artifacts: { ios: { all: { file: `${VERSION}/ios-all.zip`, sha256: sha256(evil), size: evil.length } } },
    }),
  );
  const result = await run(['ios', '--lock', lock, '--cache', cache]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain('unsafe path "../escaped"');
  expect(existsSync(join(cache, 'escaped'))).toBe(false);
  expect(readdirSync(cache).filter((n) => !['downloads'].includes(n))).toEqual([]);
});

it('uses a local directory of build_binaries.py output without downloading', async () => {
  const local = join(dir, 'third-party', 'android');
  for (const abi of ['arm64-v8a', 'x86_64']) {
    mkdirSync(join(local, abi), { recursive: true });
    writeFileSync(join(local, abi, 'libexecutorch.so'), 'elf');
  }
  mkdirSync(join(local, 'include/executorch/extension/module'), { recursive: true });
  writeFileSync(join(local, 'include/executorch/extension/module/module.h'), '');
  const lock = writeLock(lockFor('http://127.0.0.1:9'));
  const result = await run(['android', '--lock', lock, '--cache', cache, '--json'], { RNE_BINARIES_DIR: local });
  expect(result.code).toBe(0);
  expect(JSON.parse(result.stdout)).toMatchObject({ source: 'local', dirs: { 'arm64-v8a': local, x86_64: local } });
  expect(server.requests).toEqual([]);

  rmSync(join(local, 'x86_64'), { recursive: true });
  const missing = await run(['android', '--lock', lock], { RNE_BINARIES_DIR: local });
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain(`RNE_BINARIES_DIR ${local} lacks x86_64/libexecutorch.so`);
});

it('serves from a mirror base URL', async () => {
  serve();
  const lock = writeLock(lockFor('http://127.0.0.1:9/nowhere'));
  const result = await run(['ios', '--lock', lock, '--cache', cache, '--json'], {
    RNE_BINARIES_MIRROR: `${server.baseUrl}/${REPO}/resolve/${TAG}/`,
  });
  expect(result.code).toBe(0);
});

it('says what to do when the lock has no artifact for the platform', async () => {
  const lock = writeLock(lockFor(server.baseUrl, { artifacts: { android: {} } }));
  const result = await run(['ios', '--lock', lock, '--cache', cache]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(`the binaries lock ${lock} (version ${VERSION}) has no ios "all" artifact`);
  expect(result.stderr).toContain('set RNE_BINARIES_DIR');
  const abi = writeLock(lockFor(server.baseUrl, { artifacts: { android: { all: { x86_64: entry('android-x86_64-all.zip') } } } }));
  const noAbi = await run(['android', '--abi', 'arm64-v8a', '--lock', abi, '--cache', cache]);
  expect(noAbi.stderr).toContain('has no android "all" arm64-v8a artifact');
  expect(existsSync(cache)).toBe(false);
});

it('refuses a lock written for another package version', async () => {
  const lock = writeLock(lockFor(server.baseUrl, { version: '0.0.1' }));
  const result = await run(['ios', '--lock', lock, '--cache', cache]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(`is for react-native-executorch 0.0.1, but the package is ${VERSION}`);
});

it('names the URL when the server cannot be reached, leaving nothing unpacked', async () => {
  const closed = await new Promise<number>((done) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
  const lock = writeLock(lockFor(`http://127.0.0.1:${closed}`));
  const result = await run(['ios', '--lock', lock, '--cache', cache]);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(`cannot download http://127.0.0.1:${closed}/${REPO}/resolve/${TAG}/${VERSION}/ios-all.zip (`);
  expect(result.stderr).toContain('ECONNREFUSED');
  expect(result.stderr).not.toContain('resuming'); // a refused connection is not retried at once
  expect(result.stderr).not.toContain('is kept in'); // nothing was received
  expect(existsSync(join(cache, sha256(ARTIFACTS['ios-all.zip']!)))).toBe(false);
  expectNothingPartial();
});
