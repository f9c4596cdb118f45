import { ChatTemplate, type ChatTemplateEngine } from './template';

const JINJA = 'chat_template.jinja';
const CONFIG = 'tokenizer_config.json';

function sibling(path: string, name: string): string {
  return path.replace(/[^/\\]*$/, name);
}

/** Whether a tokenizer_config.json text holds a chat template (a malformed one errors later). */
function hasTemplate(config: string): boolean {
  try {
    return (JSON.parse(config) as { chat_template?: unknown }).chat_template != null;
  } catch {
    return true;
  }
}

async function readIfThere(readText: (path: string) => Promise<string>, path: string): Promise<string | null> {
  try {
    return await readText(path);
  } catch {
    // Not there (or unreadable): the other file decides, as in transformers.
    return null;
  }
}

/**
 * The chat template of a model's files, found the way transformers finds it: `chat_template.jinja`
 * (recent Hugging Face repos), else the `chat_template` of `tokenizer_config.json`, whose special
 * tokens are used either way. `path` is the file the model names (either of the two); the other
 * is looked for beside it. One difference, so that a config that holds its template is read
 * alone: `chat_template.jinja` is looked for only when that config has no `chat_template`
 * (transformers would prefer the .jinja file when a repo has both; repos saved by recent
 * transformers keep the template in one place only).
 */
export async function loadChatTemplate(
  readText: (path: string) => Promise<string>,
  path: string,
  engine?: ChatTemplateEngine,
): Promise<ChatTemplate> {
  if (path.endsWith('.jinja')) {
    const chatTemplateJinja = await readText(path);
    return ChatTemplate.fromFiles(
      { chatTemplateJinja, tokenizerConfig: await readIfThere(readText, sibling(path, CONFIG)) },
      engine,
    );
  }
  const tokenizerConfig = await readText(path);
  if (hasTemplate(tokenizerConfig)) return ChatTemplate.fromTokenizerConfig(tokenizerConfig, engine);
  return ChatTemplate.fromFiles(
    { chatTemplateJinja: await readIfThere(readText, sibling(path, JINJA)), tokenizerConfig },
    engine,
  );
}
