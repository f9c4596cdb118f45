import { ExecutorchError } from '../../src';

/** The `code` of the ExecutorchError a call rejects with; fails the test on any other outcome. */
export async function codeOf(promise: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    expect(error).toBeInstanceOf(ExecutorchError);
    return (error as ExecutorchError).code;
  }
  throw new Error('expected an ExecutorchError');
}
