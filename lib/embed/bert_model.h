// BERT encoder forward in fp32 on the CPU (Devlin et al. 2018; transformers' BertModel):
//   x = LN(word[id] + pos[t] + type[0]);  per layer:  x = LN(x + Attn(x));  x = LN(x + W2·gelu(W1·x))
// The same encoder serves DistilBERT and ELECTRA (other names, no token types) and MPNet (Song et al. 2020;
// transformers' MPNetModel, as all-mpnet-base-v2): no token types, positions from 2 (fairseq's padding_idx 1 + 1),
// and every layer's scores q·k/√d plus a relative-position bias table[bucket(j - i), head] shared by all layers
// (T5's bidirectional buckets: 32, max distance 128; relative_position.h); and RoBERTa / XLM-RoBERTa (Liu et al. 2019,
// Conneau et al. 2020; transformers' RobertaModel: BERT's layers and names, fairseq's positions from pad_token_id + 1).
// Sequences are packed back to back without padding ([N_total, H] rows, N_total = Σ lengths), so
// every linear is one cblas_sgemm over all tokens of the batch and self-attention runs per
// (sequence, head) over that sequence's real tokens only, which equals HF's padding mask.
// Weights: model.safetensors as HF saves BertModel (optionally under a "bert." or other prefix,
// as in BertForXxx and sentence-transformers checkpoints), F32/F16/BF16, kept as fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace retro {

struct BertConfig {
    int vocab_size = 0, hidden = 0, layers = 0, heads = 0, intermediate = 0;
    int max_position = 512, type_vocab = 2;
    float layer_norm_eps = 1e-12f;
    std::string hidden_act = "gelu";   // gelu (erf) | gelu_new | gelu_pytorch_tanh | relu
    // DistilBERT (model_type "distilbert": dim, n_layers, n_heads, hidden_dim, activation): BERT's post-LayerNorm
    // layers under other tensor names, without token type embeddings (type_vocab 0)
    bool distilbert = false;
    // MPNet (model_type "mpnet"): BERT's config names, no token types, positions offset by 2, relative-position bias
    bool mpnet = false;
    int relative_buckets = 0;   // MPNet: rows of encoder.relative_attention_bias (transformers reads the first 32)
    std::string model_type = "bert";   // config.json's: bert, distilbert, electra, mpnet, roberta, xlm-roberta
    // fairseq's positions (MPNet: 1, XLM-R: pad_token_id; -1 = BERT's 0, 1, 2, ...): a token with this id sits at this
    // position, every other one at it + the count of such other tokens up to it
    int position_padding_idx = -1;
    // tokens a sequence may hold: max_position_embeddings, less the position rows before the first token
    int max_tokens() const { return position_padding_idx >= 0 ? max_position - position_padding_idx - 1 : max_position; }
    // ModernBERT (model_type "modernbert"; Warner et al. 2024, transformers' ModernBertModel): pre-norm layers
    // (LayerNorm without bias by default; none before layer 0's attention), rotary positions, a GLU feed-forward
    // (Wi -> [input | gate], act(input) * gate -> Wo), no position or token type tables, a final LayerNorm, and
    // attention within |i - j| <= sliding_window on the layers not marked global (global_attn_every_n_layers).
    bool modernbert = false;
    std::vector<char> layer_global;     // per layer: full attention (1) or the sliding window (0)
    int sliding_window = 64;            // local_attention / 2
    double rope_theta_global = 160000.0, rope_theta_local = 10000.0;
    bool norm_bias = false, attention_bias = false, mlp_bias = false;
};

// Reads config.json (BertConfig fields as HF writes them, or DistilBertConfig's); throws UserError naming the file.
BertConfig bert_config_read(const std::string& path);

// The position ids of one sequence of `len` token ids (the CPU and CUDA encoders' embeddings): 0, 1, 2, ... (BERT);
// fairseq's for MPNet and RoBERTa / XLM-R (transformers' create_position_ids_from_input_ids, padding_idx P): a token
// with id P sits at position P, every other token at P + the count of tokens other than id P up to it.
void bert_position_ids(const BertConfig& config, const std::int32_t* ids, std::int64_t len, std::int32_t* positions);

class BertModel {
public:
    // Reads dir/config.json and dir/model.safetensors; throws UserError naming a missing or bad file.
    explicit BertModel(const std::string& dir);
    const BertConfig& config() const { return cfg_; }

    // Last hidden states of `count` sequences packed back to back: ids[offsets[s] .. offsets[s+1]),
    // each at most config().max_tokens() long. out: [offsets[count], hidden].
    void forward(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;
    // forward, then the mean of each sequence's hidden states (all its tokens, [CLS] and [SEP]
    // included, as sentence-transformers' mean pooling over the attention mask): out [count, hidden].
    void forward_mean(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;
    // The same with each sequence's first token's state ([CLS]) in place of the mean (sentence-transformers'
    // pooling_mode_cls_token: bge-*, msmarco-distilbert-base-tas-b). The last layer then runs its queries, output
    // projection and feed-forward for the first rows alone (embed/pooled_attention.h; not for MPNet's relative bias,
    // which runs every row).
    void forward_cls(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;
    // The same with the element-wise max over each sequence's hidden states (pooling_mode_max_tokens).
    void forward_max(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out) const;

    // The weights as loaded (fp32, Hugging Face layouts: nn.Linear weights [out, in]); read by the CUDA model.
    struct Layer {
        std::vector<float> w_qkv, b_qkv;   // [3H, H], [3H]: query, key, value stacked
        std::vector<float> w_o, b_o, ln1_g, ln1_b;
        std::vector<float> w_1, b_1, w_2, b_2, ln2_g, ln2_b;
    };
    struct Embeddings {
        const std::vector<float>& word;   // [vocab, H]
        const std::vector<float>& pos;    // [max_position, H]
        const std::vector<float>& type;   // [type_vocab, H] (DistilBERT: [1, H] zeros); token type 0 is used
        const std::vector<float>& ln_g;
        const std::vector<float>& ln_b;
    };
    Embeddings embeddings() const { return {word_, pos_, type_, emb_ln_g_, emb_ln_b_}; }
    // ModernBERT's final LayerNorm (empty for the other architectures; its embeddings' norm is embeddings().ln_g/ln_b,
    // layer 0's empty ln1 the identity)
    const std::vector<float>& final_ln_g() const { return final_ln_g_; }
    // MPNet's relative-position bias table [relative_buckets, heads] (empty for the other architectures)
    const std::vector<float>& relative_bias() const { return rel_bias_; }
    const std::vector<Layer>& layers() const { return layers_; }

private:
    // The longest sequence of a batch, each checked against max_tokens() and every id against the vocabulary.
    int checked_batch(const std::int32_t* ids, const std::int64_t* offsets, int count) const;
    // forward; with first_rows_only only each sequence's first row of `out` holds its final state (forward_cls)
    void forward_rows(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                      bool first_rows_only) const;
    // forward, then `pool` over each sequence's rows (mean_pool_rows, max_pool_rows: embed/packed_batches.h)
    void forward_pooled(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                        void (*pool)(const float*, std::int64_t, int, float*)) const;
    // ModernBERT's tensors (modernbert_model.cpp), read by the constructor, and its forward, called by forward
    void load_modernbert(const class CheckpointWeights& st, const std::string& prefix);
    void forward_modernbert(const std::int32_t* ids, const std::int64_t* offsets, int count, float* out,
                            bool first_rows_only) const;
    struct PackedLayers;   // the dense layers packed for the CPU kernel (nn/packed_linear.h), built on first use
    const PackedLayers& packed() const;

    BertConfig cfg_;
    std::vector<float> word_, pos_, type_, emb_ln_g_, emb_ln_b_, rel_bias_, final_ln_g_, final_ln_b_;
    std::vector<Layer> layers_;
    std::shared_ptr<PackedLayers> packed_;
};

}  // namespace retro
