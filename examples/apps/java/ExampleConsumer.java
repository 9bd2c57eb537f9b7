// A Java KafkaConsumer to run as a kgctl chaos fleet (docs/your-app.md). Built and started
// by run.sh next to it:
//
//   run.sh BOOTSTRAP GROUP TOPICS NAME [--verifiable] [--processing-ms MS]
//          [--stall-in-revoke-ms MS --stall-member NAME]
//
// It polls, "processes" each record (sleeps --processing-ms), then commits the batch's
// next offsets synchronously: at-least-once. --verifiable also prints the JSON lines of
// Kafka's VerifiableConsumer (records_consumed after processing, offsets_committed,
// partitions_assigned/revoked), so that kgctl judges at-least-once and duplicates exactly.
//
// --stall-in-revoke-ms is the deliberate bug: the member named by --stall-member blocks
// in onPartitionsRevoked (as an application that drains a queue or flushes a slow sink
// there), once, past max.poll.interval.ms: the group waits for it, then goes on without it.
//
// The client id (KGCTL_CLIENT_ID), the instance id of a static member (KGCTL_INSTANCE_ID)
// and the timeouts (KGCTL_SESSION_TIMEOUT_MS, ...) are the ones kgctl gives.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ExampleConsumer {
    private static boolean verifiable;

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: run.sh BOOTSTRAP GROUP TOPICS NAME [options]");
            System.exit(2);
        }
        String name = args[3];
        long processingMs = 0;
        long stallMs = 0;
        String stallMember = "";
        for (int i = 4; i < args.length; i++) {
            switch (args[i]) {
                case "--verifiable" -> verifiable = true;
                case "--processing-ms" -> processingMs = Long.parseLong(args[++i]);
                case "--stall-in-revoke-ms" -> stallMs = Long.parseLong(args[++i]);
                case "--stall-member" -> stallMember = args[++i];
                default -> {
                    System.err.println("unknown option " + args[i]);
                    System.exit(2);
                }
            }
        }
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, env("KGCTL_CLIENT_ID", name));
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, env("KGCTL_SESSION_TIMEOUT_MS", "6000"));
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, env("KGCTL_HEARTBEAT_INTERVAL_MS", "500"));
        config.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, env("KGCTL_MAX_POLL_INTERVAL_MS", "30000"));
        // A partition growth is seen within a second, as the scenario's checks expect.
        config.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (!env("KGCTL_INSTANCE_ID", "").isEmpty()) {
            config.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, System.getenv("KGCTL_INSTANCE_ID"));
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config);
        CountDownLatch closed = new CountDownLatch(1);
        // SIGTERM: wake the poll, let the loop close the consumer (it leaves the group).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        boolean stalls = stallMs > 0 && stallMember.equals(name);
        ConsumerRebalanceListener listener = new Listener(stalls ? stallMs : 0);
        String pattern = env("KGCTL_PATTERN", "");
        if (!pattern.isEmpty()) {
            consumer.subscribe(Pattern.compile(pattern), listener);
        } else {
            consumer.subscribe(List.of(args[2].split(",")), listener);
        }
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    if (processingMs > 0) {
                        Thread.sleep(processingMs);
                    }
                    if (verifiable) {
                        // One line per record processed: a kill mid-batch shows exactly where.
                        say("records_consumed", "\"count\":1,\"partitions\":[{\"topic\":" + quote(r.topic())
                            + ",\"partition\":" + r.partition() + ",\"count\":1,\"minOffset\":" + r.offset()
                            + ",\"maxOffset\":" + r.offset() + "}]");
                    }
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                commit(consumer, next);
            }
        } catch (WakeupException e) {
            // SIGTERM: stop.
        } finally {
            consumer.close();
            closed.countDown();
        }
    }

    private static void commit(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            consumer.commitSync(offsets);
        } catch (WakeupException e) {
            throw e;
        } catch (KafkaException e) {
            // A rebalance took the partitions: their next owner reads from the last commit.
            if (verifiable) {
                say("offsets_committed", "\"success\":false,\"error\":" + quote(String.valueOf(e.getMessage()))
                    + ",\"offsets\":[]");
            }
            return;
        }
        if (verifiable) {
            List<String> parts = new ArrayList<>();
            offsets.forEach((tp, o) -> parts.add("{\"topic\":" + quote(tp.topic()) + ",\"partition\":"
                + tp.partition() + ",\"offset\":" + o.offset() + "}"));
            say("offsets_committed", "\"success\":true,\"offsets\":[" + String.join(",", parts) + "]");
        }
    }

    private static final class Listener implements ConsumerRebalanceListener {
        private long stallMs;

        Listener(long stallMs) {
            this.stallMs = stallMs;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (verifiable) {
                say("partitions_revoked", "\"partitions\":" + list(partitions));
            }
            if (stallMs > 0 && !partitions.isEmpty()) {
                long ms = stallMs;
                stallMs = 0; // once
                try {
                    Thread.sleep(ms);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (verifiable) {
                say("partitions_assigned", "\"partitions\":" + list(partitions));
            }
        }
    }

    private static String list(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add("{\"topic\":" + quote(tp.topic()) + ",\"partition\":" + tp.partition() + "}");
        }
        return "[" + String.join(",", out) + "]";
    }

    private static synchronized void say(String name, String fields) {
        System.out.println("{\"name\":" + quote(name) + ",\"timestamp\":" + System.currentTimeMillis() + "," + fields + "}");
        System.out.flush();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static String env(String name, String otherwise) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? otherwise : v;
    }
}
