/**
 * Paths under the models cache are built from registry and caller data (repo ids, revisions,
 * file names). Each part is checked here so that no value can point outside the cache.
 */
import { ExecutorchError } from '../errors';

/** Why `value` is not a relative `/`-separated path that stays where it is joined, or null. */
function unsafeBecause(value: string): string | null {
  if (value.length === 0) return 'it is empty';
  if (value.includes('\0')) return 'it contains a NUL character';
  // A newline or another control character in a name splits log lines, HTTP requests and the
  // lines of a listing: no published repository, revision or file has one.
  const control = /[\u0001-\u001f\u007f-\u009f\u2028\u2029]/.exec(value);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    return `it contains the control character U+${code}${control[0] === '\n' ? ' (a newline)' : ''}`;
  }
  if (value.includes('\\')) return 'it contains a backslash';
  if (value.startsWith('/')) return 'it is an absolute path';
  for (const segment of value.split('/')) {
    if (segment === '') return 'it has an empty segment (a doubled or trailing `/`)';
    if (segment === '.' || segment === '..') return `it has a \`${segment}\` segment`;
  }
  return null;
}

/**
 * Returns `value` when it is a safe relative path of `segments` segments (any number when
 * omitted); throws `invalid_path` naming `what` and the problem otherwise.
 */
export function checkedRelativePath(value: string, what: string, segments?: number): string {
  let problem = unsafeBecause(value);
  if (problem === null && segments !== undefined && value.split('/').length !== segments) {
    problem = `it must have exactly ${segments} \`/\`-separated part${segments === 1 ? '' : 's'}`;
  }
  if (problem === null) return value;
  throw new ExecutorchError(
    'invalid_path',
    `Refusing the ${what} ${JSON.stringify(value)}: ${problem}, so it could point outside the ` +
      'models cache. Use the repository id, revision and file paths exactly as published on ' +
      'Hugging Face.',
    { path: value },
  );
}

/** Checks a Hugging Face repository id (`owner/name`) and revision for use as cache folders. */
export function checkedRepoRevision(repo: string, revision: string): void {
  checkedRelativePath(repo, 'repository id', 2);
  checkedRelativePath(revision, 'revision', 1);
}

/** Joins an absolute root and relative parts with single `/` separators. */
export function joinPath(...parts: string[]): string {
  return parts
    .map((p, i) => (i === 0 ? p.replace(/\/+$/, '') : p.replace(/^\/+|\/+$/g, '')))
    .filter((p, i) => i === 0 || p.length > 0)
    .join('/');
}

/** The folder part of a `/`-separated path. */
export function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}
