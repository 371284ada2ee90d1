#!/usr/bin/env python3
"""Writes a randomly initialised BERT-family encoder of a given shape (default: all-MiniLM-L6-v2's, 384 hidden, 6 layers,
12 heads, 1536 intermediate) as a Hugging Face model folder, for timing `retro-bench embed` where the real weights cannot
be fetched (a lent GPU machine has no network). Speed does not depend on the weights' values. --arch mpnet (all-mpnet-base-v2:
--hidden 768 --layers 12 --heads 12 --intermediate 3072) and xlm-roberta (multilingual-e5-small: 384, 12, 12, 1536)
write those architectures; bert and mpnet take the bert_tiny golden vocabulary (mpnet with MPNet's specials around it),
xlm-roberta the xlmr_tiny sentencepiece model, modernbert (modernbert-embed-base: --hidden 768 --layers 22 --heads 12
--intermediate 1152; local_attention 128, full attention every third layer) the modernbert_tiny tokenizer.json, so both
encoders see the same ids.
Usage: python tests/peers/make_bert_shape.py --out /tmp/bert-minilm-shape [--arch bert --hidden 384 --layers 6 --heads 12]
"""
import argparse
import json
import os
import shutil


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=1536)
    golden = os.path.join(os.path.dirname(__file__), "..", "reference", "golden")
    ap.add_argument("--vocab", default=os.path.join(golden, "bert_tiny", "vocab.txt"))
    ap.add_argument("--arch", choices=["bert", "mpnet", "xlm-roberta", "modernbert"], default="bert")
    a = ap.parse_args()
    import torch
    import transformers

    torch.manual_seed(0)
    os.makedirs(a.out, exist_ok=True)
    with open(a.vocab, encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    shape = dict(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                 intermediate_size=a.intermediate, hidden_act="gelu")
    if a.arch == "bert":
        model = transformers.BertModel(transformers.BertConfig(vocab_size=len(vocab), max_position_embeddings=512, **shape),
                                       add_pooling_layer=False)
        tokenizer_class = "BertTokenizer"
    elif a.arch == "mpnet":   # all-mpnet-base-v2's layout: <s> <pad> </s> <unk>, the vocabulary, <mask>
        vocab = ["<s>", "<pad>", "</s>", "<unk>"] + vocab + ["<mask>"]
        model = transformers.MPNetModel(transformers.MPNetConfig(vocab_size=len(vocab), max_position_embeddings=514,
                                                                 layer_norm_eps=1e-5, **shape), add_pooling_layer=False)
        tokenizer_class = "MPNetTokenizer"
    elif a.arch == "modernbert":   # its byte-level BPE tokenizer.json (a generic fast tokenizer), rotary, GLU, window
        tok_dir = os.path.join(golden, "modernbert_tiny")
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, f), os.path.join(a.out, f))
        tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
        model = transformers.ModernBertModel(transformers.ModernBertConfig(
            vocab_size=len(tok), pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
            bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, hidden_size=a.hidden, num_hidden_layers=a.layers,
            num_attention_heads=a.heads, intermediate_size=a.intermediate))
        model.eval().save_pretrained(a.out, safe_serialization=True)
        print(a.out)
        return
    else:
        import sentencepiece as spm
        spiece = os.path.join(golden, "xlmr_tiny", "sentencepiece.bpe.model")
        pieces = spm.SentencePieceProcessor(model_file=spiece).get_piece_size()
        model = transformers.XLMRobertaModel(transformers.XLMRobertaConfig(vocab_size=pieces + 2, max_position_embeddings=514,
                                                                           type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5,
                                                                           **shape), add_pooling_layer=False)
        shutil.copy(spiece, os.path.join(a.out, "sentencepiece.bpe.model"))
        tokenizer_class = "XLMRobertaTokenizer"
    model.eval().save_pretrained(a.out, safe_serialization=True)
    if a.arch != "xlm-roberta":
        with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": tokenizer_class, "model_max_length": 512}, f)
    print(a.out)


if __name__ == "__main__":
    main()
