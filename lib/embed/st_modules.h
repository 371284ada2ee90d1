// The sentence-transformers folder layout around a Hugging Face encoder (as GTR and Sentence-T5
// ship): modules.json lists the modules in order, each in its own sub-folder:
//   Transformer  (path "" or "0_Transformer": config.json, model.safetensors, the tokenizer)
//   Pooling      (1_Pooling/config.json: mean or max over the tokens, or the CLS token; word_embedding_dimension)
//   Dense        (2_Dense/config.json {in_features, out_features, bias, activation_function} and
//                 2_Dense/model.safetensors with linear.weight [out, in] (+ linear.bias))
//   Normalize    (no files: L2 normalisation)
// sentence_bert_config.json beside modules.json gives max_seq_length. Without modules.json the
// folder is a plain checkpoint: mean pooling, no Dense, normalised. Reading checks each Dense
// against the one before it; the caller checks Pooling and the first Dense against the encoder.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/packed_linear.h"

namespace retro {

struct StDense {
    std::string dir;                  // the module's folder
    int in = 0, out = 0;
    bool tanh = false;                // activation_function Tanh (else Identity)
    nn::PackedLinear linear;          // linear.weight [out, in] (+ linear.bias), copied in
    // y[rows, out] = act(x[rows, in] · W^T + b)
    void apply(const float* x, std::int64_t rows, float* y) const;
};

struct StModules {
    bool present = false;             // modules.json was found
    std::string transformer_dir;      // folder of the encoder checkpoint
    std::string pooling = "mean";     // mean | max | cls (the first token's state)
    bool include_prompt = true;       // 1_Pooling's include_prompt: false leaves a prompt's tokens out of the pool
    int pooling_dim = 0;              // 1_Pooling's word_embedding_dimension (0: no Pooling module)
    std::vector<StDense> dense;       // applied in order after pooling
    bool normalize = false;           // a Normalize module is listed (RetroKit normalises in any case)
    int max_seq_length = 0;           // sentence_bert_config.json, 0 when absent
    std::vector<std::string> files;   // the Dense modules' folders, in order (their weights' fingerprints: CheckpointWeights)
};

// The prompt sentence-transformers puts before every text of DIR's model unless told otherwise:
// config_sentence_transformers.json's prompts[default_prompt_name] ("" where the file, the name or the prompt is not
// there); UserError naming the file where it is not JSON or names a prompt it does not hold.
std::string st_default_prompt(const std::string& dir);

// config_sentence_transformers.json's prompts[name] ("" where the file names it null, nullopt where the file or the
// name is not there); UserError naming the file where it is not JSON.
std::optional<std::string> st_named_prompt(const std::string& dir, const std::string& name);

// Reads dir/modules.json and the files of its modules; a folder without modules.json gives the
// defaults (transformer_dir = dir). UserError naming the file for anything missing or unsupported.
StModules st_modules_read(const std::string& dir);

}  // namespace retro
