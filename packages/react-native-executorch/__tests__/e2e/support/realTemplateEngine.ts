/**
 * E2e jest setup: templates built without an explicit engine (`ChatTemplate.fromString(...)` in
 * a suite) render with the Node-API addon, so these suites check the C++ engine every host
 * renders with (an app gets it from its installed native module).
 */
import { setTestChatTemplateEngine } from '../../../src/chat/template';
import { createRealNative } from './realNative';

setTestChatTemplateEngine(createRealNative({ os: 'android', isSimulator: false, osVersion: '34' }));
