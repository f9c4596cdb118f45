/**
 * scripts/fetch-binaries.js on a really full disk: its cache is a 1 MiB tmpfs, so the kernel
 * answers ENOSPC (a mocked fs would not show what Node's streams do with a short write). Mounting
 * needs root, or passwordless sudo as on CI runners; where neither is there the tests fail saying
 * so, rather than skip.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { bytes, HfServer, sha256 } from './support/hfServer';
import { zip } from './support/zip';

const PACKAGE_DIR = resolve(__dirname, '..');
const SCRIPT = join(PACKAGE_DIR, 'scripts', 'fetch-binaries.js');
const VERSION: string = JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')).version;
const REPO = 'software-mansion/react-native-executorch-binaries';
const TAG = `v${VERSION}`;

function asRoot(args: string[]): void {
  const [cmd, argv] = process.getuid?.() === 0 ? [args[0]!, args.slice(1)] : ['sudo', ['-n', ...args]];
  try {
    execFileSync(cmd, argv, { stdio: 'pipe' });
  } catch (e) {
    const why = (e as { stderr?: Buffer }).stderr?.toString().trim() || String(e);
    throw new Error(`\`${args.join(' ')}\` failed (${why}): this test needs a real full filesystem; ` +
      'run it as root or with passwordless sudo');
  }
}

/** An iOS artifact whose library is `size` incompressible bytes. */
function artifact(size: number): Buffer {
  const files = {
    'ExecuTorch.xcframework/Info.plist': Buffer.from('<plist/>'),
    'ExecuTorch.xcframework/ios-arm64/libexecutorch.a': bytes(size, 7),
  };
  const manifest = {
    version: VERSION,
    files: Object.entries(files).map(([path, data]) => ({ path, size: data.length, sha256: sha256(data) })),
  };
  return zip({ 'rne-binaries.json': Buffer.from(JSON.stringify(manifest)), ...files });
}

/** Every file under `root`, relative, sorted. */
function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((p) => statSync(join(root, p)).isFile())
    .sort();
}

let server: HfServer;
let dir: string;
let cache: string;

beforeEach(async () => {
  server = new HfServer();
  await server.start();
  dir = mkdtempSync(join(tmpdir(), 'rne-fetch-full-'));
  cache = mkdtempSync(join(tmpdir(), 'rne-fetch-tmpfs-'));
  asRoot(['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=1777', 'tmpfs', cache]);
});

afterEach(async () => {
  await server.stop();
  try {
    asRoot(['umount', cache]);
  } finally {
    rmSync(cache, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
});

async function fetchIos(body: Buffer): Promise<{ code: number; stdout: string; stderr: string }> {
  const lockFile = join(dir, 'binaries.lock.json');
  const entry = { file: `${VERSION}/ios-all.zip`, sha256: sha256(body), size: body.length };
  writeFileSync(
    lockFile,
    JSON.stringify({
      schema: 1,
      package: 'react-native-executorch',
      version: VERSION,
      base_url: `${server.baseUrl}/${REPO}/resolve/${TAG}`,
      artifacts: { ios: { all: entry } },
    }),
  );
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RNE_BINARIES')));
  return new Promise((done) => {
    execFile(process.execPath, [SCRIPT, 'ios', '--lock', lockFile, '--cache', cache, '--json'], { env: clean },
      (error, stdout, stderr) => done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

it('fails a download bigger than the disk clearly, installs nothing, and resumes once there is room', async () => {
  const body = artifact(2_000_000);
  server.add(REPO, TAG, `${VERSION}/ios-all.zip`, { body });
  const part = join('downloads', `${sha256(body)}.zip.part`);

  const full = await fetchIos(body);
  expect(full.code).toBe(1);
  expect(full.stderr).toContain(`no space left on device for ${join(cache, part)}`);
  expect(full.stderr).toContain(`is kept in ${join(cache, part)} and the next build resumes it`);
  // Nothing installed, nothing being unpacked, no stale lock: only the named download, which
  // holds exactly the artifact's first bytes (a short write lost nowhere), so resuming is sound.
  expect(filesUnder(cache)).toEqual([part]);
  const kept = readFileSync(join(cache, part));
  expect(kept.length).toBeGreaterThan(0);
  expect(kept.equals(body.subarray(0, kept.length))).toBe(true);

  asRoot(['mount', '-o', 'remount,size=8m', cache]);
  const after = await fetchIos(body);
  expect(after.stderr).not.toContain('no space');
  expect(after.code).toBe(0);
  expect(server.requests.map((r) => r.range)).toEqual([undefined, `bytes=${kept.length}-`]);
  const installed = JSON.parse(after.stdout).dirs.ios;
  expect(installed).toBe(join(cache, sha256(body)));
  expect(filesUnder(cache)).toEqual(
    ['ExecuTorch.xcframework/Info.plist', 'ExecuTorch.xcframework/ios-arm64/libexecutorch.a', 'rne-binaries.json']
      .map((f) => join(sha256(body), f)),
  );
});

it('fails an unpack that fills the disk clearly, leaving nothing half-unpacked', async () => {
  // The zip (~600 kB) fits the 1 MiB disk, but not together with its unpacked copy.
  const body = artifact(600_000);
  server.add(REPO, TAG, `${VERSION}/ios-all.zip`, { body });
  const part = join('downloads', `${sha256(body)}.zip.part`);

  const full = await fetchIos(body);
  expect(full.code).toBe(1);
  expect(full.stderr).toContain(`cannot unpack ${server.baseUrl}/${REPO}/resolve/${TAG}/${VERSION}/ios-all.zip ` +
    `into ${cache} (no space left on device)`);
  expect(full.stderr).toContain('nothing was left half-unpacked');
  // The verified download stays (the next build unpacks it without downloading again); no
  // directory of the artifact, complete or not, and no temporary unpack directory.
  expect(filesUnder(cache)).toEqual([part]);
  expect(readdirSync(cache)).toEqual(['downloads']);
  expect(readFileSync(join(cache, part)).equals(body)).toBe(true);
});
