// retro-bench embed: chunks/s of the `bert` embedder (WordPiece + encoder + mean pool + L2), or with
// --embedder t5 of the `t5` one (spiece + encoder + pool + Dense + L2), on N texts of about `tokens`
// model tokens each, and, with --peer, of Hugging Face transformers (tests/peers/hf_embed.py for
// bert, tests/peers/st_embed.py: sentence-transformers, for t5; torch CPU) on the same texts, model,
// threads, batch and max_length, side by side in one run with the ratio (--rounds: side_by_side.h).
// With --embedder clip, images/s of the clip embedder's vision path instead (clip_embed_bench.h); with clip-text,
// chunks/s of its text path (CLIP BPE + text tower + projection + L2; peer tests/peers/clip_embed.py --texts).
#pragma once
#include <cstdint>
#include <string>

namespace retro::bench {

struct EmbedBenchOptions {
    std::string embedder = "bert";  // bert | t5 | clip | clip-text
    std::string model;              // BERT checkpoint folder (config.json, model.safetensors, vocab.txt) or T5 folder
    std::int64_t chunks = 512;      // texts embedded per timed run
    int tokens = 64;                // model tokens per text ([CLS]/[SEP] or </s> not counted)
    int min_tokens = 0;             // > 0: lengths drawn uniformly from [min_tokens, tokens]
    int batch = 64;
    int max_length = 128;           // clip-text: 0 = the model's text positions (the CLI's default there)
    int repeats = 3;
    std::string texts;              // source text (any UTF-8 file) cut into chunks; empty = synthetic words
    std::uint64_t seed = 1;
    std::string texts_out;          // write the chunk texts here (one JSON string a line) for a peer
    std::string peer;               // python script to run as the peer (tests/peers/hf_embed.py)
    std::string python = "python3";
    std::string json;               // write the results here
    std::string device = "cpu";     // cpu | cuda: where both encoders run (the peer gets --device too)
    int rounds = 1;                 // alternate RetroKit and the peer this many times; median ratio
    bool peer_sorted = false;       // the peer batches texts sorted by length (sentence-transformers' order)
    // clip only (the text fields above do not apply to it):
    std::string images;             // a folder of JPEG/PNG images; empty = image_count synthetic ones
    std::int64_t image_count = 64;  // synthetic images per timed run
    std::string images_out;         // write the synthetic images here and keep them (else a temp folder)
};

// Runs the benchmark: table on stdout, notes on stderr. Threads are thread_count().
void run_embed_bench(const EmbedBenchOptions& opt, const std::string& command_line);

}  // namespace retro::bench
