#include "rne/runner/token_text.h"

#include <algorithm>

namespace rne::runner {

Result<TokenTextStream> TokenTextStream::create(const tokenizer::Tokenizer& tokenizer,
                                                const std::vector<std::string>& keep_special_tokens) {
  std::vector<tokenizer::TokenId> kept;
  for (const std::string& text : keep_special_tokens) {
    const auto id = tokenizer.token_to_id(text);
    if (!id) {
      return Error{ErrorCode::kInvalidArgument,
                   "keepSpecialTokens: \"" + text + "\" is not a token of this model's tokenizer"};
    }
    if (!tokenizer.is_special(*id)) {
      return Error{ErrorCode::kInvalidArgument,
                   "keepSpecialTokens: \"" + text +
                       "\" is not a special token of this model's tokenizer (its text is always "
                       "streamed)"};
    }
    kept.push_back(*id);
  }
  return TokenTextStream(tokenizer, std::move(kept));
}

bool TokenTextStream::skipped(tokenizer::TokenId id) const {
  return tokenizer_->is_special(id) && std::find(kept_.begin(), kept_.end(), id) == kept_.end();
}

std::string TokenTextStream::next(tokenizer::TokenId id) {
  if (skipped(id)) return {};
  return decoder_.next(id);
}

}  // namespace rne::runner
