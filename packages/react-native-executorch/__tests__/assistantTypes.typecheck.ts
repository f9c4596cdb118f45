/**
 * Type-level test, checked by `npm run typecheck` and never run: `assistant: true` type-checks
 * only for models with an assistant drafter in some variant. Each `@ts-expect-error` line must
 * be an error, or tsc reports the directive as unused.
 */
import { LLMModule, models, useLLM, type AnyLLMDescriptor, type HasAssistant } from '../src';

declare const anyModel: AnyLLMDescriptor;

export function typeChecks(): void {
  new LLMModule({ model: models.llm.gemma4_e2b, backend: 'xnnpack', assistant: true });
  new LLMModule({ model: models.llm.smollm2_135m, assistant: false });
  // A model not known statically is checked at load.
  new LLMModule({ model: anyModel, assistant: true });
  useLLM({ model: models.llm.gemma4_e2b, assistant: true });

  // @ts-expect-error SmolLM2 has no assistant drafter.
  new LLMModule({ model: models.llm.smollm2_135m, assistant: true });
  // @ts-expect-error Nor through the hook.
  useLLM({ model: models.llm.smollm2_135m, assistant: true });

  const gemma: HasAssistant<typeof models.llm.gemma4_e2b> = true;
  const smol: HasAssistant<typeof models.llm.smollm2_135m> = false;
  void [gemma, smol];
}
