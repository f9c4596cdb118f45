/**
 * A React state update outside act() fails the test that caused it: its assertions may have read
 * a state the app never shows, and jest would otherwise only print a warning. React reports the
 * update through console.error; the message is kept and the test fails after it ran.
 */
import { format } from 'node:util';

const actWarnings: string[] = [];
const consoleError = console.error.bind(console);

beforeAll(() => {
  jest.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
    const text = format(...args);
    if (text.includes('not wrapped in act(')) actWarnings.push(text.split('\n')[0]!);
    consoleError(...args);
  });
});

afterEach(() => {
  const found = actWarnings.splice(0);
  if (found.length) {
    throw new Error(
      `${found.length} React state update(s) outside act(): ${[...new Set(found)].join('; ')} Await what ` +
        'updates the hook (waitFor, or act around the call) before the test ends.',
    );
  }
});
