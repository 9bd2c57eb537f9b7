import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The conformance suite's Java member for the one thing VerifiableConsumer cannot do:
 * change its subscription while it runs. It behaves as VerifiableConsumer does where
 * the suite looks (the classic protocol, commitSync after each batch unless
 * enable.auto.commit, a listener without onPartitionsLost, so lost partitions are
 * printed as revoked) and prints the same JSON lines for the listener calls and failed
 * commits. A line "subscribe T1,T2" on stdin makes the poll loop subscribe to those
 * topics; SIGTERM closes the consumer.
 *
 * Arguments: the client properties file, the topics (comma-separated).
 */
public class ResubscribingMember {
    private static synchronized void print(String name, String body) {
        System.out.println("{\"timestamp\":" + System.currentTimeMillis() + ",\"name\":\"" + name
                + "\"" + body + "}");
        System.out.flush();
    }

    private static String partitions(Collection<TopicPartition> parts) {
        List<String> items = new ArrayList<>();
        for (TopicPartition tp : parts) {
            items.add("{\"topic\":\"" + tp.topic() + "\",\"partition\":" + tp.partition() + "}");
        }
        return ",\"partitions\":[" + String.join(",", items) + "]";
    }

    private static String quoted(String text) {
        return "\"" + String.valueOf(text).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putIfAbsent("auto.offset.reset", "earliest");
        props.putIfAbsent("enable.auto.commit", "false");
        boolean autoCommit = Boolean.parseBoolean(props.getProperty("enable.auto.commit"));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                print("partitions_revoked", partitions(parts));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                print("partitions_assigned", partitions(parts));
            }
        };
        AtomicReference<String> next = new AtomicReference<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (line.startsWith("subscribe ")) {
                        next.set(line.substring("subscribe ".length()).trim());
                        consumer.wakeup();
                    }
                }
            } catch (Exception e) {
                // stdin closed: nothing more to read
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        CountDownLatch closed = new CountDownLatch(1);
        final boolean[] closing = {false};
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            closing[0] = true;
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(Arrays.asList(args[1].split(",")), listener);
        print("startup_complete", "");
        try {
            while (!closing[0]) {
                try {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                    if (!records.isEmpty() && !autoCommit) {
                        try {
                            consumer.commitSync();
                        } catch (WakeupException e) {
                            throw e;
                        } catch (Exception e) {
                            print("offsets_committed", ",\"success\":false,\"error\":" + quoted(e.getMessage()));
                        }
                    }
                } catch (WakeupException e) {
                    // a new subscription or closing: the loop decides
                }
                String topics = next.getAndSet(null);
                if (topics != null && !closing[0]) {
                    consumer.subscribe(Arrays.asList(topics.split(",")), listener);
                }
            }
        } finally {
            consumer.close();
            print("shutdown_complete", "");
            closed.countDown();
        }
    }
}
