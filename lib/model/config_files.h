// The model configs shipped with RetroKit (examples/configs/*.json), found by name: `--config demo` is the installed
// share/retrokit/configs/demo.json (beside the tools' bin/, `make install`), or the source tree's examples/configs/
// for tools run from their build folder. A file that exists is always taken as given (a folder named like a shipped
// config, such as a run called `demo`, is not).
// provides: resolve_model_config, shipped_model_configs, shipped_configs_hint
#pragma once
#include <string>
#include <vector>

namespace retro {

// `given` where it names something; else, for a bare name (no '/'), NAME or NAME.json among the shipped configs;
// else `given` unchanged (its reader then says it cannot be opened, with shipped_configs_hint()).
std::string resolve_model_config(const std::string& given);

// The names (without .json) of the shipped configs found, sorted; empty where neither folder is there.
std::vector<std::string> shipped_model_configs();

// "give a config file, or a shipped config by name: demo, tiny, ... (FOLDER)", or the plain file advice where none
// is found.
std::string shipped_configs_hint();

}  // namespace retro
