/**
 * Jest setup: templates built without an explicit engine (`ChatTemplate.fromString(...)` in a
 * unit test) render with the double of the C++ engine (src/testing/templateDouble.ts), which an
 * app gets from its installed native module; no native module is installed here.
 */
import { setTestChatTemplateEngine } from '../../src/chat/template';
import { FakeNative } from '../../src/testing/fakeNative';

setTestChatTemplateEngine(new FakeNative());
