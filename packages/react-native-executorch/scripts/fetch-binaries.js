#!/usr/bin/env node
/**
 * Puts ExecuTorch's native binaries where an app's native build looks for them.
 *
 * Called by the podspec at `pod install` and by android/build.gradle before the native build;
 * Node >= 20 built-ins only (it runs before any dependency could be installed for it).
 *
 *   node fetch-binaries.js ios [--link third-party/ios] [--json]
 *   node fetch-binaries.js android [--abi arm64-v8a ...] [--json]
 *
 * From binaries.lock.json (written by tools/publish_binaries.py) it downloads the artifact of
 * the platform, backend set and ABI (resuming a dropped connection), checks its size and sha256,
 * and unpacks it atomically into a cache shared by every app on the machine, one directory per
 * artifact sha256: an unpacked artifact is reused, a half-unpacked one never becomes visible.
 * `--json` prints where each build's binaries are ({"dirs": {"ios"|<abi>: dir}}); `--link PATH`
 * makes PATH (relative to the package) a symlink to the iOS directory, where the podspec looks.
 *
 * Overrides (option, or environment variable):
 *   --local-dir / RNE_BINARIES_DIR   a staging of tools/build_binaries.py (third-party/<platform>),
 *                                    used as it is: no download (offline builds, this repo's CI)
 *   --mirror / RNE_BINARIES_MIRROR   base URL that replaces the lock's (same layout)
 *   --backends / RNE_BINARIES_BACKENDS  "all" (default: GPU delegate + XNNPACK) or "cpu"
 *                                    (XNNPACK only: the smaller artifact)
 *   --cache / RNE_BINARIES_CACHE     the cache directory
 *   --lock                           the lock file (default: the package's)
 */
'use strict';

const fs = require('node:fs');
const fsp = require('node:fs/promises');
const http = require('node:http');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const { pipeline } = require('node:stream/promises');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const PLATFORMS = ['ios', 'android'];
const ABIS = ['arm64-v8a', 'x86_64'];
const BACKEND_SETS = ['all', 'cpu'];
const RELEASE_MANIFEST = 'rne-binaries.json';
const ATTEMPTS = 4; // a dropped connection is resumed this many times in all
const IDLE_TIMEOUT_MS = 30000;
const HINT_LOCAL =
  'or build the binaries yourself (`python tools/build_binaries.py --platform PLATFORM` in the ' +
  'react-native-executorch repository) and set RNE_BINARIES_DIR to the staged third-party/PLATFORM';

class FetchError extends Error {}

function fail(message) {
  throw new FetchError(message);
}

function parseArgs(argv, env) {
  const opts = {
    platform: undefined,
    abis: [],
    json: false,
    link: undefined,
    localDir: env.RNE_BINARIES_DIR || undefined,
    mirror: env.RNE_BINARIES_MIRROR || undefined,
    backends: env.RNE_BINARIES_BACKENDS || 'all',
    cache: env.RNE_BINARIES_CACHE || undefined,
    lock: path.join(PACKAGE_DIR, 'binaries.lock.json'),
  };
  const valued = { '--abi': 'abi', '--link': 'link', '--local-dir': 'localDir', '--mirror': 'mirror',
    '--backends': 'backends', '--cache': 'cache', '--lock': 'lock' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') opts.json = true;
    else if (valued[arg]) {
      const value = argv[++i];
      if (value === undefined) fail(`${arg} needs a value`);
      if (arg === '--abi') opts.abis.push(value);
      else opts[valued[arg]] = value;
    } else if (!arg.startsWith('-') && opts.platform === undefined) opts.platform = arg;
    else fail(`unknown argument ${arg}; usage: fetch-binaries.js ios|android [--abi ABI] [--json] ...`);
  }
  if (!PLATFORMS.includes(opts.platform)) fail(`the platform must be ios or android, not ${opts.platform}`);
  if (!BACKEND_SETS.includes(opts.backends)) {
    fail(`backend set "${opts.backends}" (RNE_BINARIES_BACKENDS or the plugin's \`backends\`) must be ` +
      `"all" (the GPU delegate and XNNPACK) or "cpu" (XNNPACK only)`);
  }
  if (opts.platform === 'ios' && opts.abis.length) fail('--abi only applies to android');
  for (const abi of opts.abis) if (!ABIS.includes(abi)) fail(`unknown ABI ${abi}: binaries exist for ${ABIS.join(', ')}`);
  if (opts.platform === 'android' && !opts.abis.length) opts.abis = [...ABIS];
  return opts;
}

function defaultCache(env) {
  if (process.platform === 'darwin') return path.join(os.homedir(), 'Library', 'Caches', 'react-native-executorch', 'binaries');
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'react-native-executorch', 'binaries');
}

function log(message) {
  process.stderr.write(`react-native-executorch: ${message}\n`);
}

// ------------------------------------------------------------------------------------------------
// The lock

function readJson(file, what, remedy) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    fail(`${what} ${file} cannot be read (${e.code || e.message}): ${remedy}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    fail(`${what} ${file} is not valid JSON (${e.message}): ${remedy}`);
  }
}

/** The lock entries this build needs: [{key, entry}] with key "ios" or an ABI. */
function lockedArtifacts(opts) {
  const remedy = 'reinstall react-native-executorch';
  const lock = readJson(opts.lock, 'the binaries lock', remedy);
  const pkg = readJson(path.join(PACKAGE_DIR, 'package.json'), 'the package manifest', remedy);
  if (lock.schema !== 1 || typeof lock.artifacts !== 'object' || typeof lock.base_url !== 'string') {
    fail(`the binaries lock ${opts.lock} is not a schema-1 lock: ${remedy}`);
  }
  if (lock.version !== pkg.version) {
    fail(`the binaries lock ${opts.lock} is for react-native-executorch ${lock.version}, but the ` +
      `package is ${pkg.version}: the lock of this version was not published with it. Reinstall ` +
      `the package, ${HINT_LOCAL.replace(/PLATFORM/g, opts.platform)}`);
  }
  const sets = lock.artifacts[opts.platform];
  const chosen = sets && sets[opts.backends];
  const missing = (what) => fail(
    `the binaries lock ${opts.lock} (version ${lock.version}) has no ${what} artifact` +
    (sets ? ` (it has: ${Object.keys(sets).join(', ') || 'none'})` : '') + `: no such binaries were ` +
    `published. ${opts.backends !== 'all' ? 'Choose another backend set (RNE_BINARIES_BACKENDS), ' : ''}` +
    HINT_LOCAL.replace(/PLATFORM/g, opts.platform));
  if (!chosen) missing(`${opts.platform} "${opts.backends}"`);
  const base = (opts.mirror || lock.base_url).replace(/\/+$/, '');
  const wanted = opts.platform === 'ios' ? [['ios', chosen]] : opts.abis.map((abi) => [abi, chosen[abi]]);
  return wanted.map(([key, entry]) => {
    if (!entry) missing(`${opts.platform} "${opts.backends}" ${key}`);
    if (!/^[0-9a-f]{64}$/.test(entry.sha256 || '') || !Number.isSafeInteger(entry.size) || typeof entry.file !== 'string') {
      fail(`the binaries lock ${opts.lock}: the ${key} entry lacks file, size or sha256: ${remedy}`);
    }
    return { key, entry, url: `${base}/${entry.file.split('/').map(encodeURIComponent).join('/')}` };
  });
}

// ------------------------------------------------------------------------------------------------
// Download with resume

function request(url, headers, redirects = 0) {
  return new Promise((resolve, reject) => {
    let parsed;
    try {
      parsed = new URL(url);
    } catch {
      reject(new FetchError(`${url} is not a URL: fix the mirror (RNE_BINARIES_MIRROR) or the lock`));
      return;
    }
    const client = parsed.protocol === 'https:' ? https : parsed.protocol === 'http:' ? http : null;
    if (!client) {
      reject(new FetchError(`${url}: only http and https URLs can be downloaded`));
      return;
    }
    const req = client.get(parsed, { headers: { 'user-agent': 'react-native-executorch-fetch', ...headers } }, (res) => {
      if ([301, 302, 303, 307, 308].includes(res.statusCode) && res.headers.location) {
        res.resume();
        if (redirects >= 5) reject(new FetchError(`${url}: too many redirects`));
        else resolve(request(new URL(res.headers.location, parsed).toString(), headers, redirects + 1));
        return;
      }
      resolve(res);
    });
    req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new Error(`no data for ${IDLE_TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
  });
}

async function downloadOnce(url, part, size) {
  let have = 0;
  try {
    have = fs.statSync(part).size;
  } catch {}
  if (have > size) {
    fs.rmSync(part, { force: true });
    have = 0;
  }
  if (have === size) return;
  const res = await request(url, have ? { range: `bytes=${have}-` } : {});
  if (res.statusCode === 200) {
    have = 0; // the server sent the whole file: start over
  } else if (res.statusCode !== 206) {
    res.resume();
    throw new FetchError(`${url} answered HTTP ${res.statusCode}`);
  }
  const out = fs.createWriteStream(part, { flags: have ? 'a' : 'w' });
  let received = have;
  res.on('data', (chunk) => {
    received += chunk.length;
    if (received > size) res.destroy(new FetchError(`${url} sent more than the locked ${size} bytes`));
  });
  await pipeline(res, out);
  if (received < size) throw new Error(`the connection closed after ${received} of ${size} bytes`);
}

async function download(url, part, size) {
  for (let attempt = 1; ; attempt++) {
    try {
      await downloadOnce(url, part, size);
      return;
    } catch (e) {
      // A refused connection or an unknown host does not come right by retrying at once.
      const final = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENOSPC'].includes(e.code);
      if (e instanceof FetchError || final || attempt >= ATTEMPTS) {
        const reason = e.code === 'ENOSPC' ? `no space left on device for ${part}` : e.message;
        const kept = fs.existsSync(part) && fs.statSync(part).size > 0
          ? `; what was received is kept in ${part} and the next build resumes it` : '';
        fail(`cannot download ${url} (${reason}). Check the network or the server, or set ` +
          `RNE_BINARIES_MIRROR to a mirror of it${kept}`);
      }
      log(`download of ${url} interrupted (${e.code || e.message}); resuming (attempt ${attempt + 1})`);
    }
  }
}

async function sha256(file) {
  const hash = crypto.createHash('sha256');
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

// ------------------------------------------------------------------------------------------------
// Zip reading (stored and deflated entries: what Python's zipfile writes)

async function readAt(fd, offset, length) {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fd.read(buf, 0, length, offset);
  return buf.subarray(0, bytesRead);
}

async function zipEntries(file) {
  const fd = await fsp.open(file, 'r');
  try {
    const { size } = await fd.stat();
    const tailLength = Math.min(size, 65557);
    const tail = await readAt(fd, size - tailLength, tailLength);
    const eocd = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
    if (eocd < 0) fail(`${file} is not a zip archive`);
    const count = tail.readUInt16LE(eocd + 10);
    const cdSize = tail.readUInt32LE(eocd + 12);
    const cdOffset = tail.readUInt32LE(eocd + 16);
    const cd = await readAt(fd, cdOffset, cdSize);
    const entries = [];
    for (let p = 0, i = 0; i < count; i++) {
      if (cd.readUInt32LE(p) !== 0x02014b50) fail(`${file}: corrupt zip central directory`);
      const method = cd.readUInt16LE(p + 10);
      const compressed = cd.readUInt32LE(p + 20);
      const nameLength = cd.readUInt16LE(p + 28);
      const extraLength = cd.readUInt16LE(p + 30);
      const commentLength = cd.readUInt16LE(p + 32);
      const local = cd.readUInt32LE(p + 42);
      const name = cd.subarray(p + 46, p + 46 + nameLength).toString('utf8');
      p += 46 + nameLength + extraLength + commentLength;
      if (name.endsWith('/')) continue;
      const header = await readAt(fd, local, 30);
      const start = local + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
      entries.push({ name, method, start, compressed });
    }
    return entries;
  } finally {
    await fd.close();
  }
}

function safeJoin(root, name) {
  if (name.includes('\\') || path.isAbsolute(name) || name.split('/').some((s) => s === '..' || s === '' || s === '.')) {
    fail(`the artifact holds an unsafe path "${name}"; it was not unpacked`);
  }
  return path.join(root, ...name.split('/'));
}

async function unzip(file, dest) {
  for (const e of await zipEntries(file)) {
    if (e.method !== 0 && e.method !== 8) fail(`${file}: ${e.name} uses zip method ${e.method}, not stored or deflate`);
    const target = safeJoin(dest, e.name);
    await fsp.mkdir(path.dirname(target), { recursive: true });
    const source = e.compressed
      ? fs.createReadStream(file, { start: e.start, end: e.start + e.compressed - 1 })
      : require('node:stream').Readable.from([]);
    await pipeline(source, ...(e.method === 8 ? [zlib.createInflateRaw()] : []), fs.createWriteStream(target));
  }
}

/** Every file the artifact's release manifest lists, with its sha256; nothing else. */
async function verifyUnpacked(dir, origin) {
  const manifest = readJson(path.join(dir, RELEASE_MANIFEST), 'the release manifest of', `the artifact ${origin} is broken`);
  for (const f of manifest.files || []) {
    const file = safeJoin(dir, f.path);
    if (!fs.existsSync(file) || (await sha256(file)) !== f.sha256) {
      fail(`${origin}: ${f.path} does not match the artifact's manifest; it was not unpacked`);
    }
  }
  return manifest;
}

// ------------------------------------------------------------------------------------------------
// The cache

/**
 * Creates `lockFile` holding this process's pid, or returns false when it exists. The file
 * appears with the pid already in it (a hard link to a written file), so a waiter never reads it
 * empty and takes a live owner for a dead one.
 */
function tryLock(lockFile) {
  const written = `${lockFile}.${process.pid}`;
  fs.writeFileSync(written, String(process.pid));
  try {
    fs.linkSync(written, lockFile);
    return true;
  } catch (e) {
    if (e.code === 'EEXIST') return false;
    if (e.code !== 'EPERM' && e.code !== 'ENOTSUP') throw e;
    // A file system without hard links: create it exclusively, then write the pid.
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
      return true;
    } catch (e2) {
      if (e2.code === 'EEXIST') return false;
      throw e2;
    }
  } finally {
    fs.rmSync(written, { force: true });
  }
}

/** The pid in `lockFile`: null when it is gone (its owner just released it), 0 when it holds none. */
function lockOwner(lockFile) {
  try {
    return Number(fs.readFileSync(lockFile, 'utf8')) || 0;
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM'; // it exists, owned by another user
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withLock(lockFile, fn) {
  const started = Date.now();
  while (!tryLock(lockFile)) {
    const pid = lockOwner(lockFile);
    if (pid === null) continue; // released between the two calls: try again at once
    if (pid !== 0 && isAlive(pid)) {
      if (Date.now() - started > 30 * 60 * 1000) {
        fail(`${lockFile} is held by process ${pid} for 30 minutes: stop it or delete the file`);
      }
      await sleep(500);
      continue;
    }
    // Its owner died, or wrote no pid (it died between creating the file and writing it; give a
    // live one the moment it needs): take it over, unless another waiter already has (the file
    // then holds that waiter's pid).
    if (pid === 0) await sleep(500);
    if (lockOwner(lockFile) === pid) fs.rmSync(lockFile, { force: true });
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockFile, { force: true });
  }
}

/** The directory of the unpacked artifact, downloading and unpacking it when it is not cached. */
async function cached({ entry, url }, cacheRoot) {
  const dest = path.join(cacheRoot, entry.sha256);
  const done = (d) => fs.existsSync(path.join(d, RELEASE_MANIFEST));
  if (done(dest)) return dest;
  try {
    fs.mkdirSync(path.join(cacheRoot, 'downloads'), { recursive: true });
  } catch (e) {
    fail(`cannot create the binaries cache ${cacheRoot} (${e.code}): set RNE_BINARIES_CACHE to a writable directory`);
  }
  return withLock(path.join(cacheRoot, 'downloads', `${entry.sha256}.lock`), async () => {
    if (done(dest)) return dest; // another build finished it while we waited
    const part = path.join(cacheRoot, 'downloads', `${entry.sha256}.zip.part`);
    log(`downloading ${url} (${(entry.size / 1e6).toFixed(1)} MB)`);
    await download(url, part, entry.size);
    const got = fs.statSync(part).size;
    const hash = await sha256(part);
    if (got !== entry.size || hash !== entry.sha256) {
      fs.rmSync(part, { force: true });
      fail(`${url} sent ${got} bytes with sha256 ${hash}, but the lock says ${entry.size} bytes with ` +
        `sha256 ${entry.sha256}: the download is corrupt or was altered and was deleted. Retry; if it ` +
        `persists, the server or a proxy serves other bytes (set RNE_BINARIES_MIRROR to a good mirror)`);
    }
    const tmp = fs.mkdtempSync(path.join(cacheRoot, `.unpack-${entry.sha256.slice(0, 12)}-`));
    try {
      await unzip(part, tmp);
      await verifyUnpacked(tmp, url);
      fs.renameSync(tmp, dest);
    } catch (e) {
      fs.rmSync(tmp, { recursive: true, force: true });
      if (e instanceof FetchError) throw e;
      const reason = e.code === 'ENOSPC' ? 'no space left on device' : e.message;
      fail(`cannot unpack ${url} into ${cacheRoot} (${reason}): free space or set ` +
        `RNE_BINARIES_CACHE to another disk; nothing was left half-unpacked`);
    }
    fs.rmSync(part, { force: true });
    return dest;
  });
}

// ------------------------------------------------------------------------------------------------

function checkLocal(dir, opts) {
  const root = path.resolve(dir);
  const need = opts.platform === 'ios'
    ? ['ExecuTorch.xcframework/Info.plist']
    : ['include/executorch/extension/module/module.h', ...opts.abis.map((abi) => `${abi}/libexecutorch.so`)];
  for (const rel of need) {
    if (!fs.existsSync(path.join(root, rel))) {
      fail(`RNE_BINARIES_DIR ${root} lacks ${rel}: point it at a staging of ` +
        `\`python tools/build_binaries.py --platform ${opts.platform}\` (third-party/${opts.platform})`);
    }
  }
  return root;
}

function link(target, linkPath) {
  const at = path.resolve(PACKAGE_DIR, linkPath);
  fs.mkdirSync(path.dirname(at), { recursive: true });
  const tmp = `${at}.tmp-${process.pid}`;
  fs.rmSync(tmp, { force: true });
  fs.symlinkSync(target, tmp, 'dir');
  try {
    const st = fs.lstatSync(at);
    if (!st.isSymbolicLink()) fail(`${at} exists and is not a symlink: remove it, it is where the binaries get linked`);
  } catch (e) {
    if (e instanceof FetchError) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
  }
  fs.renameSync(tmp, at); // atomic: the build sees the old link or the new one
}

async function main(argv, env) {
  const opts = parseArgs(argv, env);
  const dirs = {};
  let source;
  if (opts.localDir) {
    const root = checkLocal(opts.localDir, opts);
    for (const key of opts.platform === 'ios' ? ['ios'] : opts.abis) dirs[key] = root;
    source = 'local';
  } else {
    const cacheRoot = path.resolve(opts.cache || defaultCache(env));
    for (const artifact of lockedArtifacts(opts)) dirs[artifact.key] = await cached(artifact, cacheRoot);
    source = 'lock';
  }
  if (opts.link) {
    if (opts.platform !== 'ios') fail('--link only applies to ios');
    link(dirs.ios, opts.link);
  }
  const result = { platform: opts.platform, backends: opts.backends, source, dirs };
  if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else for (const [key, dir] of Object.entries(dirs)) log(`${key} binaries: ${dir}`);
  return result;
}

if (require.main === module) {
  main(process.argv.slice(2), process.env).catch((e) => {
    process.stderr.write(`react-native-executorch: ${e instanceof FetchError ? e.message : e.stack}\n`);
    process.exit(1);
  });
}

module.exports = { main, FetchError };
