// Where an embedder's --model points. A checkpoint folder as it is; a Hugging Face cache folder of one model
// (`models--ORG--NAME`, which holds `refs/` and `snapshots/`) as the snapshot its `refs/main` names; and a Hub id
// (`ORG/NAME`, or a bare `NAME`) that is not a path, as that snapshot in the local Hugging Face cache — the folder
// `huggingface_hub` downloads into and transformers reads from. Nothing is downloaded: a model not in the cache
// is refused with the command that fetches it.
#pragma once
#include <string>

namespace retro {

// The Hugging Face hub cache: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, with ~ and $VARS expanded where and as often as
// huggingface_hub expands them (Python's os.path.expanduser, then expandvars: an unset $VAR stays as written; a
// variable set to "" counts as set, as os.getenv has it).
std::string hf_hub_cache_dir();

// The absolute, normalised checkpoint folder `given` names (above), or a one-line UserError: an empty `given`
// ("the EMBEDDER embedder needs a model folder"), a path or id that names no folder, a cache folder whose snapshot
// cannot be told. `holds` says what a checkpoint folder of this embedder holds, for the messages.
std::string model_folder_resolve(const std::string& given, const std::string& embedder, const std::string& holds);
// model_folder_resolve with what a checkpoint folder of `embedder` (bert, t5, clip) holds.
std::string embedder_model_folder(const std::string& embedder, const std::string& given);

// UserError naming DIR/config.json where its model_type is one another of the embedders reads (a t5 folder given to
// --embedder bert was "vocab.txt: missing"), with the --embedder to pass; nothing where the file is absent, not JSON
// or its model_type unknown (the embedder's own reading then says what is wrong). `shown`: the --embedder named in the
// message where it is not `embedder` (retro-bench's clip-text reads a clip folder).
void embedder_folder_kind_check(const std::string& embedder, const std::string& dir, const std::string& shown = "");

}  // namespace retro
