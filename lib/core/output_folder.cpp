// Implementation of output_folder.h.
#include "core/output_folder.h"

#include <exception>
#include <filesystem>
#include <fstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fs = std::filesystem;

namespace retro {
namespace {

// The path with symlinks and ".." resolved as far as it exists (weakly_canonical), so that "db", "./db/" and a
// link to it compare equal. An empty path stays empty.
fs::path resolved(const std::string& p) {
    if (p.empty()) return {};
    std::error_code ec;
    fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
    if (ec) return fs::absolute(p).lexically_normal();
    return r;
}

// True when `inner` is `outer` or lies below it.
bool inside(const fs::path& inner, const fs::path& outer) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i) {
        if (o->empty()) continue;   // a trailing separator
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

// The "tool" field of dir/manifest.json, or "" when there is none or it cannot be read (then the tool's own
// checks, which read the manifest, speak).
std::string manifest_tool(const fs::path& dir) {
    std::ifstream f(dir / "manifest.json");
    if (!f) return "";
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("tool") || !j["tool"].is_string()) return "";
    return j["tool"].get<std::string>();
}

}  // namespace

NewOutputFolder::NewOutputFolder(std::string out) : out_(std::move(out)), exceptions_(std::uncaught_exceptions()) {
    std::error_code ec;
    existed_ = out_.empty() || fs::exists(out_, ec);
}

NewOutputFolder::~NewOutputFolder() {
    if (existed_ || keep_ || std::uncaught_exceptions() <= exceptions_) return;
    std::error_code ec;
    if (!fs::exists(fs::path(out_) / "manifest.json", ec)) fs::remove_all(out_, ec);
}

void output_folder_guard(const std::string& out, const std::string& tool, const std::vector<OutputInput>& inputs,
                         bool clears) {
    if (out.empty()) user_error_in("--out", "is empty", "name the output folder");
    const fs::path o = resolved(out);
    std::error_code ec;
    for (const OutputInput& in : inputs) {
        if (in.path.empty()) continue;
        const fs::path i = resolved(in.path);
        if (fs::is_directory(i, ec) && i == o)
            user_error_in(out, "is also an input of this run (" + in.option + " " + in.path + ")", "choose another --out");
        if (clears && inside(i, o))
            user_error_in(out, "holds an input of this run (" + in.option + " " + in.path + "), which --force would delete",
                          "choose another --out");
    }
    if (!fs::is_directory(o, ec)) return;
    const std::string owner = manifest_tool(o);
    if (!owner.empty() && owner != tool)
        user_error_in(out, "holds " + owner + "'s output (manifest.json), not " + tool + "'s",
                      "choose another --out: --force replaces only a folder " + tool + " made");
}

}  // namespace retro
