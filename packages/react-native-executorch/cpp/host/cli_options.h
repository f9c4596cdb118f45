// The command-line options of the host CLIs: `--name VALUE` options and `--name` switches, each
// declared once with what it sets, and one loop that applies argv and says what is wrong (an
// unknown option with the known ones listed, an option without its value, a number that is
// not one).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rne::host {

class CliOptions {
 public:
  // `--name VALUE`: `set(VALUE)`, which throws std::invalid_argument for a bad value.
  CliOptions& value(std::string name, std::function<void(const std::string&)> set) {
    options_.push_back({std::move(name), true, std::move(set)});
    return *this;
  }
  CliOptions& text(std::string name, std::string& out) {
    return value(std::move(name), [&out](const std::string& v) { out = v; });
  }
  template <typename Int>
  CliOptions& integer(std::string name, Int& out) {
    return value(std::move(name),
                 [&out](const std::string& v) { out = static_cast<Int>(to_int(v)); });
  }
  // `--name`: `out = to`.
  CliOptions& flag(std::string name, bool& out, bool to = true) {
    return action(std::move(name), [&out, to] { out = to; });
  }
  // `--name`: `run()`.
  CliOptions& action(std::string name, std::function<void()> run) {
    options_.push_back(
        {std::move(name), false, [run = std::move(run)](const std::string&) { run(); }});
    return *this;
  }
  // The words that are not options (those not starting with "--"), in order; without this
  // call every word must be an option.
  CliOptions& words(std::vector<std::string>& out) {
    words_ = &out;
    return *this;
  }

  // Applies argv[1..argc); what is wrong, or nothing.
  std::optional<std::string> parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const Option* option = find(arg);
      if (option == nullptr && words_ != nullptr && arg.rfind("--", 0) != 0) {
        words_->push_back(arg);
        continue;
      }
      if (option == nullptr) return "unknown option " + arg + " (options:" + names() + ")";
      std::string value;
      if (option->takes_value) {
        if (i + 1 >= argc) return arg + " needs a value";
        value = argv[++i];
      }
      try {
        option->set(value);
      } catch (const std::exception& e) {
        return arg + ": " + e.what() + ", got '" + value + "'";
      }
    }
    return std::nullopt;
  }

  // A whole base-10 integer, or std::invalid_argument.
  static int64_t to_int(const std::string& text) {
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) throw std::invalid_argument("takes an integer");
    return n;
  }

 private:
  struct Option {
    std::string name;
    bool takes_value;
    std::function<void(const std::string&)> set;
  };

  const Option* find(const std::string& name) const {
    for (const Option& option : options_) {
      if (option.name == name) return &option;
    }
    return nullptr;
  }
  std::string names() const {
    std::string out;
    for (const Option& option : options_) out += " " + option.name;
    return out;
  }

  std::vector<Option> options_;
  std::vector<std::string>* words_ = nullptr;
};

}  // namespace rne::host
