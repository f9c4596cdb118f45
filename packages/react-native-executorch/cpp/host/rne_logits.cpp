// rne_logits: feed a token sequence through our runner's ModelSession in given chunk sizes and
// write the last-position logits of every forward call, for parity tests against eager.
//
//   rne_logits --model FILE.pte --tokens 1,2,3,4,5 --chunks 3,1,1 --out logits.f32
//              [--embeds ROWS.f32 --embeds-at POSITION]...
//
// Each --embeds gives a program that takes media the rows of consecutive positions from the
// --embeds-at after it on (float32, embeds_width per row, e.g. an image's rows from rne_vision);
// other positions get zeros.
// --chunks must sum to the number of tokens; each forward starts where the previous ended.
// The output is rows of vocab_size float32 values, one row per chunk, in order. Exit status 0
// on success; otherwise one line on stderr saying what failed.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.h"

#include "rne/json/file.h"
#include "rne/runner/model_session.h"

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "rne_logits: " << message << "\n";
  std::exit(1);
}

std::vector<int64_t> parse_ids(const std::string& text, const char* what) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoll(item));
    } catch (const std::exception&) {
      fail(std::string(what) + " must be comma-separated integers, got '" + item + "'");
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, tokens_arg, chunks_arg, out_path;
  std::vector<std::string> embeds_paths;
  std::vector<int64_t> embeds_at;
  const auto problem =
      rne::host::CliOptions()
          .text("--model", model)
          .text("--tokens", tokens_arg)
          .text("--chunks", chunks_arg)
          .text("--out", out_path)
          .value("--embeds", [&](const std::string& v) { embeds_paths.push_back(v); })
          .value("--embeds-at",
                 [&](const std::string& v) {
                   embeds_at.push_back(parse_ids(v, "--embeds-at").at(0));
                 })
          .parse(argc, argv);
  if (problem) fail(*problem);
  if (model.empty() || tokens_arg.empty() || chunks_arg.empty() || out_path.empty()) {
    fail("--model, --tokens, --chunks and --out are all required");
  }
  const auto tokens = parse_ids(tokens_arg, "--tokens");
  const auto chunks = parse_ids(chunks_arg, "--chunks");
  int64_t total = 0;
  for (int64_t c : chunks) total += c;
  if (total != static_cast<int64_t>(tokens.size())) {
    fail("--chunks sum to " + std::to_string(total) + " but --tokens has " +
         std::to_string(tokens.size()) + " ids");
  }

  auto session = rne::runner::ModelSession::load(model);
  if (!session.ok()) fail(session.error().message);
  // Per position: its embeds row (zeros where --embeds gives none).
  const auto width = static_cast<size_t>((*session)->contract().embeds_width);
  std::vector<float> embeds;
  if (embeds_paths.size() != embeds_at.size()) fail("give one --embeds-at per --embeds");
  for (size_t i = 0; i < embeds_paths.size(); ++i) {
    const std::string& path = embeds_paths[i];
    if (width == 0) fail(model + " takes no embeddings");
    auto read = rne::json::read_regular_file(path, tokens.size() * width * sizeof(float));
    if (!read.ok()) fail("--embeds: " + read.error().message);
    const std::string data = std::move(read).value();
    const size_t bytes = data.size();
    const size_t rows = bytes / (width * sizeof(float));
    if (rows * width * sizeof(float) != bytes || embeds_at[i] < 0 ||
        embeds_at[i] + static_cast<int64_t>(rows) > static_cast<int64_t>(tokens.size())) {
      fail(path + " is not whole rows of " + std::to_string(width) +
           " floats within the tokens from its --embeds-at");
    }
    embeds.resize(tokens.size() * width, 0.0f);
    std::memcpy(embeds.data() + embeds_at[i] * width, data.data(), bytes);
  }
  std::ofstream out(out_path, std::ios::binary);
  if (!out) fail("cannot write " + out_path);
  int64_t pos = 0;
  for (int64_t count : chunks) {
    const float* rows = embeds.empty() ? nullptr : embeds.data() + pos * width;
    auto logits = (*session)->forward(tokens.data() + pos, count, pos, rows);
    if (!logits.ok()) fail("forward at position " + std::to_string(pos) + ": " + logits.error().message);
    out.write(reinterpret_cast<const char*>(logits->data),
              static_cast<std::streamsize>(logits->size * sizeof(float)));
    pos += count;
  }
  out.close();
  if (!out) fail("writing " + out_path + " failed");
  std::cout << "vocab_size " << (*session)->contract().vocab_size << " forwards " << chunks.size()
            << "\n";
  return 0;
}
