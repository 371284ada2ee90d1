// Implementation of model_folder.h.
#include "embed/model_folder.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <fstream>
#include <vector>

#include <pwd.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace retro {

namespace fs = std::filesystem;

namespace {

// Python's os.path.expanduser on POSIX: a leading "~" or "~/" becomes $HOME (the password file's home where HOME
// is unset), "~USER" that user's home; anything else, or an unknown user, is left as it is.
std::string expand_user(const std::string& path) {
    if (path.empty() || path[0] != '~') return path;
    const std::size_t slash = std::min(path.find('/', 1), path.size());
    std::string home;
    if (slash == 1) {
        if (const char* h = std::getenv("HOME")) home = h;
        else if (const passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
        else return path;
    } else {
        const passwd* pw = getpwnam(path.substr(1, slash - 1).c_str());
        if (!pw) return path;
        home = pw->pw_dir;
    }
    while (!home.empty() && home.back() == '/') home.pop_back();
    const std::string out = home + path.substr(slash);
    return out.empty() ? "/" : out;
}

// Python's os.path.expandvars on POSIX: $NAME and ${NAME} (NAME of ASCII letters, digits, '_') replaced by the
// variable's value where it is set, left as written where it is not.
std::string expand_vars(const std::string& path) {
    std::string out;
    std::size_t i = 0;
    while (i < path.size()) {
        if (path[i] != '$') {
            out += path[i++];
            continue;
        }
        std::size_t name_begin = i + 1, name_end = name_begin, next = name_begin;
        if (name_begin < path.size() && path[name_begin] == '{') {
            const std::size_t close = path.find('}', name_begin + 1);
            if (close == std::string::npos) {   // "${" unclosed: not a reference
                out += path[i++];
                continue;
            }
            name_begin += 1, name_end = close, next = close + 1;
        } else {
            while (name_end < path.size() &&
                   (std::isalnum(static_cast<unsigned char>(path[name_end])) || path[name_end] == '_'))
                ++name_end;
            next = name_end;
            if (name_end == name_begin) {   // a lone '$'
                out += path[i++];
                continue;
            }
        }
        const std::string name = path.substr(name_begin, name_end - name_begin);
        // no variable's name holds '=' (glibc's getenv("A=B") would answer A's entry "A=B=C" with "C")
        const char* value = name.empty() || name.find('=') != std::string::npos ? nullptr : std::getenv(name.c_str());
        out += value ? std::string(value) : path.substr(i, next - i);
        i = next;
    }
    return out;
}

// ORG/NAME or NAME as the Hub spells repository ids (letters, digits, '-', '_', '.'; not starting with '.' or '-').
bool looks_like_hub_id(const std::string& s) {
    const auto part_ok = [](const std::string& p) {
        if (p.empty() || p.size() > 96 || p[0] == '.' || p[0] == '-') return false;
        for (char c : p)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
        return true;
    };
    const std::size_t slash = s.find('/');
    if (slash == std::string::npos) return part_ok(s);
    return part_ok(s.substr(0, slash)) && part_ok(s.substr(slash + 1));
}

// A cache folder of one model: `snapshots/` beside `refs/` (or `blobs/`), no config.json of its own.
bool is_cache_repo_folder(const fs::path& dir) {
    return fs::is_directory(dir / "snapshots") && (fs::is_directory(dir / "refs") || fs::is_directory(dir / "blobs")) &&
           !fs::exists(dir / "config.json");
}

// The snapshot refs/main names, else the only snapshot there is.
fs::path cache_snapshot(const fs::path& repo, const std::string& given) {
    std::string ref;
    if (std::ifstream in(repo / "refs" / "main"); in) std::getline(in, ref);
    while (!ref.empty() && (ref.back() == '\n' || ref.back() == '\r' || ref.back() == ' ')) ref.pop_back();
    if (!ref.empty() && fs::is_directory(repo / "snapshots" / ref)) return repo / "snapshots" / ref;
    std::vector<fs::path> snapshots;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(repo / "snapshots", ec))
        if (e.is_directory()) snapshots.push_back(e.path());
    if (snapshots.size() == 1) {
        if (!ref.empty())
            log_warn(given + ": refs/main names snapshot " + ref + ", which is not in the cache; reading the only one there, " +
                     snapshots[0].filename().string());
        return snapshots[0];
    }
    const std::string refs_main = ref.empty() ? std::string(" and no refs/main naming one")
                                              : ", and refs/main names " + ref + ", which is not among them";
    user_error_in(given, (snapshots.empty() ? "is a Hugging Face cache folder without a snapshot" +
                                                  (ref.empty() ? std::string() : " (refs/main names " + ref + ")")
                                            : cat("is a Hugging Face cache folder of ", snapshots.size(), " snapshots", refs_main)),
                  snapshots.empty() ? "download the model again (hf download ORG/NAME)"
                                    : "give one of them: " + (repo / "snapshots" / "HASH").string());
}

std::string absolute_normal(const fs::path& p) {
    std::error_code ec;
    const fs::path abs = fs::absolute(p, ec);
    std::string s = (ec ? p : abs).lexically_normal().string();
    if (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

}  // namespace

std::string hf_hub_cache_dir() {
    // huggingface_hub's constants.py, step for step (a variable set to "" counts as set, as os.getenv has it):
    //   HF_HOME = expandvars(expanduser($HF_HOME or join($XDG_CACHE_HOME or ~/.cache, "huggingface")))
    //   HF_HUB_CACHE = expandvars(expanduser($HF_HUB_CACHE or $HUGGINGFACE_HUB_CACHE or join(HF_HOME, "hub")))
    const auto env = [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
    const auto expand = [](const std::string& p) { return expand_vars(expand_user(p)); };
    if (auto v = env("HF_HUB_CACHE")) return expand(*v);
    if (auto v = env("HUGGINGFACE_HUB_CACHE")) return expand(*v);   // its older name
    const std::string xdg = env("XDG_CACHE_HOME").value_or((fs::path(expand_user("~")) / ".cache").string());
    const std::string home = expand(env("HF_HOME").value_or((fs::path(xdg) / "huggingface").string()));
    return expand((fs::path(home) / "hub").string());
}

std::string model_folder_resolve(const std::string& given, const std::string& embedder, const std::string& holds) {
    if (given.empty()) user_error_in("--model", "the " + embedder + " embedder needs a model folder", "pass --model DIR");
    const std::string fix = "give a Hugging Face " + embedder + " checkpoint folder (" + holds + ")";
    if (fs::is_directory(given)) {
        const fs::path dir(given);
        return absolute_normal(is_cache_repo_folder(dir) ? cache_snapshot(dir, given) : dir);
    }
    if (fs::exists(given)) user_error_in(given, "is not a folder", fix);
    if (!looks_like_hub_id(given)) user_error_in(given, "is not a folder", fix);
    // a Hub id: models--ORG--NAME in the cache, as huggingface_hub names its folders
    std::string repo_name = "models--" + given;
    for (std::size_t at = repo_name.find('/'); at != std::string::npos; at = repo_name.find('/')) repo_name.replace(at, 1, "--");
    const fs::path cache = hf_hub_cache_dir(), repo = cache / repo_name;
    if (!fs::is_directory(repo))
        user_error_in(given, "is not a folder, nor a model in the Hugging Face cache " + cache.string(),
                      fix + ", or download it first: hf download " + given + " (huggingface-cli download in older huggingface_hub)");
    return absolute_normal(cache_snapshot(repo, given));
}

void embedder_folder_kind_check(const std::string& embedder, const std::string& dir, const std::string& shown_in) {
    const std::string& shown = shown_in.empty() ? embedder : shown_in;   // the --embedder given (retro-bench's clip-text)
    const fs::path config = fs::path(dir) / "config.json";
    std::ifstream in(config);
    if (!in) return;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string()) return;
    const std::string type = j["model_type"].get<std::string>();
    static const std::vector<std::pair<std::string, std::vector<std::string>>> kFamilies = {
        {"bert", {"bert", "distilbert", "electra", "mpnet", "roberta", "xlm-roberta", "modernbert"}},
        {"t5", {"t5", "mt5"}},
        {"clip", {"clip", "clip_vision_model", "clip_text_model"}}};
    for (const auto& [family, types] : kFamilies)
        if (family != embedder && std::find(types.begin(), types.end(), type) != types.end())
            user_error_in(config.string(), "is a \"" + type + "\" checkpoint (its model_type), which --embedder " + shown +
                                               " does not read", "pass --embedder " + family);
}

std::string embedder_model_folder(const std::string& embedder, const std::string& given) {
    const char* holds = embedder == "t5"     ? "config.json, model.safetensors, spiece.model; or a sentence-transformers one"
                        : embedder == "clip" ? "config.json, model.safetensors, vocab.json, merges.txt"
                                             : "config.json, model.safetensors, vocab.txt";
    return model_folder_resolve(given, embedder, holds);
}

}  // namespace retro
